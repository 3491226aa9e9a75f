//! Anthropic Messages API wire format: request bodies and response parsing.

use super::http::{classify, parse_body};
use super::naming::tool_name;
use crate::invariants::provider_view;
use crate::message::{ContentBlock, Message, Role, ToolResultContent, Usage};
use crate::model::{ModelError, ModelRequest, ModelResponse, StopReason};
use serde::Deserialize;
use serde_json::{Value, json};

/// Text sent in place of a message that would otherwise be empty (the API rejects those).
const EMPTY_PLACEHOLDER: &str = "(empty)";

/// The forced tool standing in for a structured-output schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchemaTool {
    pub(crate) name: String,
    /// The schema root was not an object and sits under `value`.
    pub(crate) wrapped: bool,
}

fn block_json(block: &ContentBlock) -> Option<Value> {
    Some(match block {
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let content = match content {
                ToolResultContent::Text(t) => Value::String(t.clone()),
                ToolResultContent::Blocks(blocks) => {
                    Value::Array(blocks.iter().filter_map(block_json).collect())
                }
            };
            let mut v =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
            if *is_error {
                v["is_error"] = Value::Bool(true);
            }
            v
        }
        // The API only accepts thinking it signed; unsigned thinking cannot come from it.
        ContentBlock::Thinking {
            thinking,
            signature: Some(signature),
        } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
        ContentBlock::Thinking { .. } => return None,
        ContentBlock::Image { source } => json!({"type": "image", "source": source}),
        ContentBlock::Document { source } => json!({"type": "document", "source": source}),
    })
}

fn message_json(m: &Message) -> Value {
    let mut content: Vec<Value> = m.content.iter().filter_map(block_json).collect();
    if content.is_empty() {
        content.push(json!({"type": "text", "text": EMPTY_PLACEHOLDER}));
    }
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    json!({"role": role, "content": content})
}

/// The provider settings a request body depends on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyOptions<'a> {
    pub(crate) model: &'a str,
    pub(crate) prompt_caching: bool,
    pub(crate) thinking_budget_tokens: Option<u32>,
}

/// The request body, and the schema tool when structured output is asked for.
pub(crate) fn build_body(
    config: BodyOptions<'_>,
    req: &ModelRequest,
) -> (Value, Option<SchemaTool>) {
    let mut body = json!({
        "model": config.model,
        "max_tokens": req.max_tokens,
        "messages": provider_view(&req.messages).iter().map(message_json).collect::<Vec<_>>(),
    });
    let mut system: Vec<Value> = req
        .system
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| json!({"type": "text", "text": s}))
        .collect();
    if config.prompt_caching {
        if let Some(last) = system.last_mut() {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
    }
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    let mut tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
        .collect();
    let schema_tool = req.response_schema.as_ref().map(|schema| {
        let name = tool_name(&schema.name);
        let wrapped = match schema.schema.get("type") {
            Some(t) => t.as_str() != Some("object"),
            None => schema.schema.get("properties").is_none(),
        };
        let input_schema = if wrapped {
            json!({"type": "object", "properties": {"value": schema.schema}, "required": ["value"]})
        } else {
            schema.schema.clone()
        };
        tools.push(json!({
            "name": name,
            "description": "Give your final answer by calling this tool. Its input is the answer, \
                            as JSON matching the input schema.",
            "input_schema": input_schema,
        }));
        body["tool_choice"] = json!({"type": "tool", "name": name});
        SchemaTool { name, wrapped }
    });
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(t) = req.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(budget) = config.thinking_budget_tokens {
        // The API wants the budget below max_tokens and no forced tool: small side queries
        // (selector, structured output) go without thinking.
        if schema_tool.is_none() && budget < req.max_tokens {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
            // The API requires the default temperature with thinking.
            if let Some(obj) = body.as_object_mut() {
                obj.remove("temperature");
            }
        }
    }
    (body, schema_tool)
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

fn str_field(v: &Value, k: &str) -> Result<String, ModelError> {
    v.get(k)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            let kind = v.get("type").and_then(Value::as_str).unwrap_or("?");
            ModelError::InvalidResponse(format!("{kind} block without a string {k:?}"))
        })
}

fn parse_block(v: &Value) -> Result<Option<ContentBlock>, ModelError> {
    let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
    Ok(Some(match kind {
        "text" => ContentBlock::text(str_field(v, "text")?),
        "tool_use" => ContentBlock::tool_use(
            str_field(v, "id")?,
            str_field(v, "name")?,
            v.get("input").cloned().unwrap_or_else(|| json!({})),
        ),
        "thinking" => ContentBlock::Thinking {
            thinking: str_field(v, "thinking")?,
            signature: v
                .get("signature")
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        other => {
            // redacted_thinking, server tool blocks...: no place in our message model.
            tracing::warn!(block_type = other, "skipping an unsupported content block");
            return Ok(None);
        }
    }))
}

fn stop_reason(s: Option<&str>) -> StopReason {
    match s {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") | Some("model_context_window_exceeded") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        _ => StopReason::Other,
    }
}

/// Parse a 2xx body into a response (see the module docs of `anthropic` for structured output).
pub(crate) fn parse_response(
    bytes: &[u8],
    schema_tool: Option<&SchemaTool>,
) -> Result<ModelResponse, ModelError> {
    let wire: WireResponse = parse_body(bytes)?;
    if wire.kind.as_deref() == Some("error") {
        return Err(classify(reqwest::StatusCode::OK, &Default::default(), bytes).error);
    }
    let raw = wire.content.ok_or_else(|| {
        ModelError::InvalidResponse(format!(
            "no content in the response: {:?}",
            super::http::excerpt(bytes)
        ))
    })?;
    let mut content = Vec::with_capacity(raw.len());
    for v in &raw {
        content.extend(parse_block(v)?);
    }
    let mut stop = stop_reason(wire.stop_reason.as_deref());
    if let Some(tool) = schema_tool {
        let input = content.iter().find_map(|b| match b {
            ContentBlock::ToolUse { name, input, .. } if *name == tool.name => Some(input.clone()),
            _ => None,
        });
        match input {
            Some(input) => {
                let answer = if tool.wrapped {
                    input.get("value").cloned().unwrap_or(Value::Null)
                } else {
                    input
                };
                content = vec![ContentBlock::text(answer.to_string())];
                stop = StopReason::EndTurn;
            }
            None if stop == StopReason::MaxTokens => {}
            None => {
                return Err(ModelError::InvalidResponse(format!(
                    "the model did not call the structured-output tool {:?}",
                    tool.name
                )));
            }
        }
    }
    let usage = wire.usage.unwrap_or_default();
    Ok(ModelResponse {
        id: wire
            .id
            .unwrap_or_else(|| format!("msg_{}", uuid::Uuid::new_v4().simple())),
        model: wire.model.unwrap_or_default(),
        content,
        stop_reason: stop,
        usage: Usage {
            input_tokens: usage.input_tokens.unwrap_or(0),
            output_tokens: usage.output_tokens.unwrap_or(0),
            cache_creation_input_tokens: usage.cache_creation_input_tokens.unwrap_or(0),
            cache_read_input_tokens: usage.cache_read_input_tokens.unwrap_or(0),
        },
    })
}
