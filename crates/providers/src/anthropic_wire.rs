//! Anthropic Messages API wire format: request bodies and response parsing.

use super::http::{classify, parse_body};
use super::naming::tool_name;
use super::sse::{SseDecoder, SseEvent, stream_error};
use memloop_core::invariants::provider_view;
use memloop_core::message::{ContentBlock, Message, Role, ToolResultContent, Usage};
use memloop_core::model::{
    ModelError, ModelRequest, ModelResponse, StopReason, StreamEvent, ToolChoice,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

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
        ContentBlock::RedactedThinking { data } => {
            json!({"type": "redacted_thinking", "data": data})
        }
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

/// Put a cache breakpoint on the last cacheable block of `message`; false when it has none.
fn mark_message(message: &mut Value) -> bool {
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return false;
    };
    // Thinking blocks cannot carry a breakpoint themselves.
    let Some(block) = blocks.iter_mut().rev().find(|b| {
        !matches!(
            b.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    }) else {
        return false;
    };
    block["cache_control"] = json!({"type": "ephemeral"});
    true
}

/// Cache breakpoints on the conversation: the last message (what the next loop iteration and
/// every fork from here reuse) and the message before the last user turn (what the previous
/// turn already wrote to the cache, so a turn whose last message changed still reads it).
/// With the system prompt's breakpoint that makes at most 3 of the API's 4.
fn mark_conversation(messages: &mut [Value]) {
    let Some(last) = messages.len().checked_sub(1) else {
        return;
    };
    mark_message(&mut messages[last]);
    let is_user_turn = |m: &Value| {
        m["role"] == "user"
            && m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] != "tool_result"))
    };
    if let Some(turn) = messages.iter().rposition(is_user_turn) {
        if turn > 0 && turn - 1 != last {
            mark_message(&mut messages[turn - 1]);
        }
    }
}

/// Push a declaration for every tool named in `messages`' tool calls (first use order), plus
/// one when only results remain; whether the history holds any tool block.
fn history_tool_names(messages: &[Message], tools: &mut Vec<Value>) -> bool {
    let mut names: Vec<&str> = Vec::new();
    let mut any = false;
    for block in messages.iter().flat_map(|m| &m.content) {
        match block {
            ContentBlock::ToolUse { name, .. } => {
                any = true;
                if !names.contains(&name.as_str()) {
                    names.push(name);
                }
            }
            ContentBlock::ToolResult { .. } => any = true,
            _ => {}
        }
    }
    if any && names.is_empty() {
        names.push("tool");
    }
    tools.extend(names.into_iter().map(|name| {
        json!({"name": name, "description": "Used earlier in this conversation; not available now.",
               "input_schema": {"type": "object"}})
    }));
    any
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
    let mut messages: Vec<Value> = provider_view(&req.messages)
        .iter()
        .map(message_json)
        .collect();
    if config.prompt_caching {
        mark_conversation(&mut messages);
    }
    let mut body = json!({
        "model": config.model,
        "max_tokens": req.max_tokens,
        "messages": messages,
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
    // The API rejects tool_use/tool_result history in a request without tools. A caller that
    // declares none (a side query over the conversation) gets the history's tool names as
    // declarations it may not call.
    let stubs = tools.is_empty() && history_tool_names(&req.messages, &mut tools);
    if stubs {
        body["tool_choice"] = json!({"type": "none"});
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(t) = req.temperature {
        body["temperature"] = json!(t);
    }
    if let (Some(choice), None, false) = (&req.tool_choice, &schema_tool, stubs) {
        body["tool_choice"] = match choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::Any => json!({"type": "any"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        };
    }
    if !req.stop_sequences.is_empty() {
        body["stop_sequences"] = json!(req.stop_sequences);
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
    if let Some(obj) = body.as_object_mut() {
        for (k, v) in &req.extra {
            obj.insert(k.clone(), v.clone());
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
        "redacted_thinking" => ContentBlock::RedactedThinking {
            data: str_field(v, "data")?,
        },
        other => {
            // Server tool blocks...: no place in our message model.
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

/// Decodes a Messages API event stream (`message_start`, `content_block_start`,
/// `content_block_delta` with `text_delta` / `thinking_delta` / `signature_delta` /
/// `input_json_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping`, `error`)
/// by rebuilding the non-streamed message and parsing it with [`parse_response`].
#[derive(Debug, Default)]
pub(crate) struct StreamDecoder {
    schema_tool: Option<SchemaTool>,
    message: Option<Value>,
    blocks: BTreeMap<usize, Value>,
    tool_json: BTreeMap<usize, String>,
    stop_reason: Option<String>,
    usage: serde_json::Map<String, Value>,
    stopped: bool,
}

impl StreamDecoder {
    /// A decoder; `schema_tool` as returned by [`build_body`].
    pub(crate) fn new(schema_tool: Option<SchemaTool>) -> Self {
        Self {
            schema_tool,
            ..Self::default()
        }
    }

    fn merge_usage(&mut self, usage: Option<&Value>) {
        if let Some(Value::Object(u)) = usage {
            for (k, v) in u {
                if !v.is_null() {
                    self.usage.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

fn index_of(v: &Value) -> Result<usize, ModelError> {
    v.get("index")
        .and_then(Value::as_u64)
        .map(|i| i as usize)
        .ok_or_else(|| stream_error("a content block event without an index", false))
}

fn delta_str(delta: &Value, key: &str) -> Result<String, ModelError> {
    delta
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| stream_error(format!("a delta without a string {key:?}"), false))
}

impl SseDecoder for StreamDecoder {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, ModelError> {
        let v: Value = serde_json::from_str(&event.data).map_err(|e| {
            stream_error(
                format!(
                    "malformed {:?} event ({e}): {:?}",
                    event.event,
                    super::http::excerpt(event.data.as_bytes())
                ),
                false,
            )
        })?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str())
            .to_owned();
        match kind.as_str() {
            "message_start" => {
                let message = v.get("message").cloned().unwrap_or_else(|| json!({}));
                self.merge_usage(message.get("usage"));
                self.message = Some(message);
            }
            "content_block_start" => {
                let index = index_of(&v)?;
                let block = v.get("content_block").cloned().unwrap_or_else(|| json!({}));
                if block["type"] == "tool_use" {
                    out.push(StreamEvent::ToolUseStart {
                        index,
                        id: block["id"].as_str().unwrap_or_default().to_owned(),
                        name: block["name"].as_str().unwrap_or_default().to_owned(),
                    });
                    self.tool_json.insert(index, String::new());
                }
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = index_of(&v)?;
                let delta = v.get("delta").cloned().unwrap_or_default();
                let block = self.blocks.entry(index).or_insert_with(|| json!({}));
                let append = |block: &mut Value, key: &str, more: &str| {
                    let mut s = block[key].as_str().unwrap_or_default().to_owned();
                    s.push_str(more);
                    block[key] = Value::String(s);
                };
                match delta["type"].as_str().unwrap_or_default() {
                    "text_delta" => {
                        let text = delta_str(&delta, "text")?;
                        append(block, "text", &text);
                        out.push(StreamEvent::TextDelta { index, text });
                    }
                    "thinking_delta" => {
                        let thinking = delta_str(&delta, "thinking")?;
                        append(block, "thinking", &thinking);
                        out.push(StreamEvent::ThinkingDelta { index, thinking });
                    }
                    "signature_delta" => {
                        let signature = delta_str(&delta, "signature")?;
                        append(block, "signature", &signature);
                    }
                    "input_json_delta" => {
                        let partial_json = delta_str(&delta, "partial_json")?;
                        self.tool_json
                            .entry(index)
                            .or_default()
                            .push_str(&partial_json);
                        out.push(StreamEvent::ToolInputDelta {
                            index,
                            partial_json,
                        });
                    }
                    other => tracing::debug!(delta_type = other, "ignoring a delta type"),
                }
            }
            "content_block_stop" | "ping" => {}
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_owned());
                }
                self.merge_usage(v.get("usage"));
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => {
                let kind = v
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("(no message)");
                let retryable =
                    matches!(kind, "overloaded_error" | "api_error" | "rate_limit_error");
                return Err(stream_error(format!("{kind}: {message}"), retryable));
            }
            other => tracing::debug!(event = other, "ignoring an unknown stream event"),
        }
        Ok(false)
    }

    fn is_complete(&self) -> bool {
        self.stopped || self.stop_reason.is_some()
    }

    fn finish(&mut self) -> Result<ModelResponse, ModelError> {
        let mut message = self
            .message
            .take()
            .ok_or_else(|| stream_error("the stream had no message_start", false))?;
        let mut content = Vec::new();
        for (index, mut block) in std::mem::take(&mut self.blocks) {
            if let Some(raw) = self.tool_json.get(&index) {
                block["input"] = if raw.trim().is_empty() {
                    json!({})
                } else {
                    // A call cut by max_tokens leaves invalid JSON; keep it as a string so the
                    // stop reason, not a parse error, tells the caller what happened.
                    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
                };
            }
            content.push(block);
        }
        message["content"] = Value::Array(content);
        if let Some(r) = &self.stop_reason {
            message["stop_reason"] = Value::String(r.clone());
        }
        message["usage"] = Value::Object(self.usage.clone());
        let bytes = serde_json::to_vec(&message)
            .map_err(|e| stream_error(format!("cannot rebuild the message: {e}"), false))?;
        parse_response(&bytes, self.schema_tool.as_ref())
    }

    fn whole(&mut self, body: &[u8]) -> Result<ModelResponse, ModelError> {
        parse_response(body, self.schema_tool.as_ref())
    }
}
