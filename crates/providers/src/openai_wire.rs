//! OpenAI chat completions wire format: request bodies and response parsing.

use super::http::{classify, excerpt, parse_body};
use super::naming::tool_name;
use super::sse::{SseDecoder, SseEvent, stream_error};
use memloop_core::invariants::provider_view;
use memloop_core::message::{ContentBlock, MediaSource, Message, Role, ToolResultContent, Usage};
use memloop_core::model::{
    ModelError, ModelRequest, ModelResponse, StopReason, StreamEvent, ToolChoice,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn data_url(source: &MediaSource) -> String {
    match source {
        MediaSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        MediaSource::Url { url } => url.clone(),
    }
}

/// A user content part, or `None` for blocks chat completions has no place for.
fn user_part(block: &ContentBlock) -> Option<Value> {
    Some(match block {
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Image { source } => {
            json!({"type": "image_url", "image_url": {"url": data_url(source)}})
        }
        ContentBlock::Document {
            source: source @ MediaSource::Base64 { .. },
        } => {
            json!({"type": "file", "file": {"filename": "document", "file_data": data_url(source)}})
        }
        ContentBlock::Document {
            source: MediaSource::Url { url },
        } => json!({"type": "text", "text": format!("[document: {url}]")}),
        _ => return None,
    })
}

/// Content as a plain string when it is all text (what every local server accepts), else parts.
fn content_value(parts: Vec<Value>) -> Value {
    if parts.iter().all(|p| p["type"] == "text") {
        let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        Value::String(texts.join("\n\n"))
    } else {
        Value::Array(parts)
    }
}

fn tool_result_text(content: &ToolResultContent, is_error: bool) -> String {
    let mut text = content.text();
    if let ToolResultContent::Blocks(blocks) = content {
        let media = blocks.iter().filter(|b| b.as_text().is_none()).count();
        if media > 0 {
            text.push_str(&format!("\n[{media} non-text block(s) omitted]"));
        }
    }
    if is_error {
        format!("Error: {text}")
    } else {
        text
    }
}

fn push_message(out: &mut Vec<Value>, m: &Message) {
    match m.role {
        Role::User => {
            // Tool messages must directly follow the assistant message that called the tools.
            for b in &m.content {
                if let ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } = b
                {
                    out.push(json!({"role": "tool", "tool_call_id": tool_use_id,
                                    "content": tool_result_text(content, *is_error)}));
                }
            }
            let parts: Vec<Value> = m.content.iter().filter_map(user_part).collect();
            if !parts.is_empty() {
                out.push(json!({"role": "user", "content": content_value(parts)}));
            }
        }
        Role::Assistant => {
            let text = m.text();
            let calls: Vec<Value> = m
                .tool_uses()
                .map(|(id, name, input)| {
                    json!({"id": id, "type": "function",
                           "function": {"name": name, "arguments": input.to_string()}})
                })
                .collect();
            let mut msg = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                if text.is_empty() {
                    msg["content"] = Value::Null;
                }
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
        }
    }
}

/// The provider settings a request body depends on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyOptions<'a> {
    pub(crate) model: &'a str,
    pub(crate) use_max_completion_tokens: bool,
    pub(crate) strict_schema: bool,
}

/// The request body.
pub(crate) fn build_body(config: BodyOptions<'_>, req: &ModelRequest) -> Value {
    let mut messages = Vec::new();
    let system: Vec<&str> = req
        .system
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system.join("\n\n")}));
    }
    for m in &provider_view(&req.messages) {
        push_message(&mut messages, m);
    }
    let mut body = json!({"model": config.model, "messages": messages});
    let cap = if config.use_max_completion_tokens {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body[cap] = json!(req.max_tokens);
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name,
                       "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
    }
    if let Some(schema) = &req.response_schema {
        body["response_format"] = json!({"type": "json_schema", "json_schema": {
            "name": tool_name(&schema.name), "schema": schema.schema, "strict": config.strict_schema}});
    }
    if let Some(t) = req.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(choice) = &req.tool_choice {
        body["tool_choice"] = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Any => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if !req.stop_sequences.is_empty() {
        body["stop"] = json!(req.stop_sequences);
    }
    if let Some(obj) = body.as_object_mut() {
        for (k, v) in &req.extra {
            obj.insert(k.clone(), v.clone());
        }
    }
    body
}

/// Ask for a streamed answer with usage in the last chunk.
pub(crate) fn make_streaming(body: &mut Value) {
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<WireTokenDetails>,
}

#[derive(Deserialize)]
struct WireTokenDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Tool arguments arrive as a JSON string. Invalid JSON (small local models produce it) is kept
/// as a string value, so the tool reports the problem to the model instead of the turn failing.
fn arguments(raw: Option<Value>) -> Value {
    match raw {
        Some(Value::String(s)) if s.trim().is_empty() => json!({}),
        Some(Value::String(s)) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        Some(Value::Null) | None => json!({}),
        Some(other) => other,
    }
}

fn text_of(content: Option<Value>) -> String {
    match content {
        Some(Value::String(s)) => s,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Parse a 2xx body into a response.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let wire: WireResponse = parse_body(bytes)?;
    if wire.error.is_some() {
        return Err(classify(reqwest::StatusCode::OK, &Default::default(), bytes).error);
    }
    let choice = wire
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| {
            ModelError::InvalidResponse(format!("no choices in the response: {:?}", excerpt(bytes)))
        })?;
    let message = choice.message.ok_or_else(|| {
        ModelError::InvalidResponse(format!("a choice without a message: {:?}", excerpt(bytes)))
    })?;
    let mut content = Vec::new();
    if let Some(thinking) = message.reasoning_content.filter(|t| !t.is_empty()) {
        content.push(ContentBlock::Thinking {
            thinking,
            signature: None,
        });
    }
    let text = text_of(message.content);
    let refused = message.refusal.as_ref().is_some_and(|r| !r.is_empty());
    if let Some(refusal) = message.refusal.filter(|r| !r.is_empty()) {
        content.push(ContentBlock::text(refusal));
    } else if !text.is_empty() {
        content.push(ContentBlock::text(text));
    }
    let calls = message.tool_calls.unwrap_or_default();
    let has_calls = !calls.is_empty();
    for call in calls {
        let id = call
            .id
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
        content.push(ContentBlock::tool_use(
            id,
            call.function.name,
            arguments(call.function.arguments),
        ));
    }
    let stop_reason = match choice.finish_reason.as_deref() {
        _ if refused => StopReason::Refusal,
        // Some servers (Ollama) say "stop" even when they return tool calls.
        _ if has_calls => StopReason::ToolUse,
        Some("stop") => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refusal,
        _ => StopReason::Other,
    };
    let usage = wire.usage.unwrap_or_default();
    let cached = usage
        .prompt_tokens_details
        .and_then(|d| d.cached_tokens)
        .unwrap_or(0);
    Ok(ModelResponse {
        id: wire
            .id
            .unwrap_or_else(|| format!("chatcmpl_{}", uuid::Uuid::new_v4().simple())),
        model: wire.model.unwrap_or_default(),
        content,
        stop_reason,
        usage: Usage {
            // Our input count is the uncached part; cached prompt tokens are cache reads.
            input_tokens: usage.prompt_tokens.unwrap_or(0).saturating_sub(cached),
            output_tokens: usage.completion_tokens.unwrap_or(0),
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: cached,
        },
    })
}

/// Which part of the message a streamed delta extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Reasoning,
    Text,
    Call(u64),
}

#[derive(Debug, Default)]
struct CallParts {
    id: String,
    name: String,
    arguments: String,
}

/// Decodes a chat-completions chunk stream (`data: {chunk}` lines, `delta.content`,
/// `delta.reasoning_content`, `delta.tool_calls[i].function.arguments` fragments, a usage chunk
/// with empty `choices`, `data: [DONE]`) by rebuilding the non-streamed body and parsing it with
/// [`parse_response`]. Delta indices number the parts in order of first appearance.
#[derive(Debug, Default)]
pub(crate) struct StreamDecoder {
    id: Option<String>,
    model: Option<String>,
    reasoning: String,
    text: String,
    refusal: String,
    calls: BTreeMap<u64, CallParts>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    indices: BTreeMap<Part, usize>,
}

impl StreamDecoder {
    fn index(&mut self, part: Part) -> usize {
        let next = self.indices.len();
        *self.indices.entry(part).or_insert(next)
    }
}

impl SseDecoder for StreamDecoder {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            stream_error(
                format!("malformed chunk ({e}): {:?}", excerpt(data.as_bytes())),
                false,
            )
        })?;
        if let Some(err) = v.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            return Err(stream_error(format!("error event: {message}"), false));
        }
        if self.id.is_none() {
            self.id = v.get("id").and_then(Value::as_str).map(str::to_owned);
        }
        if self.model.is_none() {
            self.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return Ok(false);
        };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(r.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(false);
        };
        let str_of = |k: &str| {
            delta
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        if let Some(t) = str_of("reasoning_content").or_else(|| str_of("reasoning")) {
            self.reasoning.push_str(t);
            let index = self.index(Part::Reasoning);
            out.push(StreamEvent::ThinkingDelta {
                index,
                thinking: t.to_owned(),
            });
        }
        if let Some(t) = str_of("content") {
            self.text.push_str(t);
            let index = self.index(Part::Text);
            out.push(StreamEvent::TextDelta {
                index,
                text: t.to_owned(),
            });
        }
        if let Some(t) = str_of("refusal") {
            self.refusal.push_str(t);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let n = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let index = self.index(Part::Call(n));
            let parts = self.calls.entry(n).or_default();
            let started = !parts.name.is_empty();
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                parts.id.push_str(id);
            }
            if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                parts.name.push_str(name);
            }
            if !started && !parts.name.is_empty() {
                out.push(StreamEvent::ToolUseStart {
                    index,
                    id: parts.id.clone(),
                    name: parts.name.clone(),
                });
            }
            if let Some(args) = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
            {
                parts.arguments.push_str(args);
                out.push(StreamEvent::ToolInputDelta {
                    index,
                    partial_json: args.to_owned(),
                });
            }
        }
        Ok(false)
    }

    fn is_complete(&self) -> bool {
        self.finish_reason.is_some()
    }

    fn finish(&mut self) -> Result<ModelResponse, ModelError> {
        let calls: Vec<Value> = self
            .calls
            .values()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        let mut message = json!({"role": "assistant", "content": self.text});
        if !self.reasoning.is_empty() {
            message["reasoning_content"] = json!(self.reasoning);
        }
        if !self.refusal.is_empty() {
            message["refusal"] = json!(self.refusal);
        }
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        let mut body =
            json!({"choices": [{"message": message, "finish_reason": self.finish_reason}]});
        if let Some(id) = &self.id {
            body["id"] = json!(id);
        }
        if let Some(model) = &self.model {
            body["model"] = json!(model);
        }
        if let Some(usage) = &self.usage {
            body["usage"] = usage.clone();
        }
        let bytes = serde_json::to_vec(&body)
            .map_err(|e| stream_error(format!("cannot rebuild the response: {e}"), false))?;
        parse_response(&bytes)
    }

    fn whole(&mut self, body: &[u8]) -> Result<ModelResponse, ModelError> {
        parse_response(body)
    }
}
