//! [`LlmSelector`]: one small side query through any [`Model`] that picks, from the manifest,
//! the memories clearly useful for the user's message.

use super::selector::{SelectionContext, Selector, SelectorError};
use async_trait::async_trait;
use memloop_core::{
    message::Message,
    model::{JsonSchema, Model, ModelError, ModelRequest},
};
use memloop_store::MemoryHeader;
use memloop_store::format_manifest_capped;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The selector's system prompt (our own words).
pub const SELECTOR_PROMPT: &str = include_str!("../templates/memory_selector.md");

/// The `purpose` of the side query.
pub const SELECTOR_PURPOSE: &str = "memory_selector";

/// Settings of [`LlmSelector`].
#[derive(Debug, Clone, PartialEq)]
pub struct LlmSelectorConfig {
    /// Output cap of the side query. Default 256.
    pub max_tokens: u32,
    /// Newest memories shown in the manifest. Default 200.
    pub manifest_cap: usize,
    /// Give up after this long ([`SelectorError::Timeout`]). Default 10 s.
    pub timeout: Duration,
    /// System prompt. Default [`SELECTOR_PROMPT`].
    pub system_prompt: String,
}

impl Default for LlmSelectorConfig {
    fn default() -> Self {
        Self {
            max_tokens: 256,
            manifest_cap: 200,
            timeout: Duration::from_secs(10),
            system_prompt: SELECTOR_PROMPT.to_owned(),
        }
    }
}

/// Asks a (small) model which memories fit the query.
///
/// Failure policy: a model error, a timeout, a cancellation or an answer without a
/// `selected_memories` list is returned as a typed [`SelectorError`], so that a
/// [`super::FallbackSelector`] can take over; the recall hook treats any error as an empty
/// selection. Names the model made up are dropped, not errors.
pub struct LlmSelector {
    model: Arc<dyn Model>,
    config: LlmSelectorConfig,
}

impl std::fmt::Debug for LlmSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmSelector")
            .field("model", &self.model.name())
            .field("config", &self.config)
            .finish()
    }
}

impl LlmSelector {
    /// A selector using `model` with default settings.
    pub fn new(model: Arc<dyn Model>) -> Self {
        Self::with_config(model, LlmSelectorConfig::default())
    }

    /// A selector with explicit settings.
    pub fn with_config(model: Arc<dyn Model>, config: LlmSelectorConfig) -> Self {
        Self { model, config }
    }

    /// The headers the manifest shows: the newest `manifest_cap` not yet surfaced.
    fn shown<'a>(
        &self,
        headers: &'a [MemoryHeader],
        ctx: &SelectionContext,
    ) -> Vec<&'a MemoryHeader> {
        headers
            .iter()
            .filter(|h| !ctx.already_surfaced.contains(&h.rel_path))
            .take(self.config.manifest_cap)
            .collect()
    }

    /// The request this selector sends for `query` (newest `manifest_cap` memories not yet
    /// surfaced).
    pub fn request(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> ModelRequest {
        let shown = self.shown(headers, ctx);
        let mut user = format!(
            "Query: {query}\n\nAvailable memories:\n{}",
            format_manifest_capped(shown, self.config.manifest_cap, "(none)")
        );
        if !ctx.recent_tools.is_empty() {
            user.push_str("\n\nRecently used tools: ");
            user.push_str(&ctx.recent_tools.join(", "));
        }
        let mut req = ModelRequest::new(SELECTOR_PURPOSE, vec![Message::user(user)]);
        req.system = vec![self.config.system_prompt.clone()];
        req.max_tokens = self.config.max_tokens;
        req.response_schema = Some(selection_schema());
        req
    }
}

/// The structured-output schema `{"selected_memories": [string]}`.
pub fn selection_schema() -> JsonSchema {
    JsonSchema {
        name: "memory_selection".into(),
        schema: serde_json::json!({
            "type": "object",
            "properties": {
                "selected_memories": { "type": "array", "items": { "type": "string" } }
            },
            "required": ["selected_memories"],
            "additionalProperties": false
        }),
    }
}

/// Find the first JSON object with a `selected_memories` array in `text` (bare, fenced, or
/// wrapped in prose) and return its strings.
///
/// ```
/// use memloop_recall::parse_selection;
/// let text = "Sure! ```json\n{\"selected_memories\": [\"a.md\"]}\n``` hope that helps";
/// assert_eq!(parse_selection(text), Some(vec!["a.md".to_string()]));
/// assert_eq!(parse_selection("no idea"), None);
/// ```
pub fn parse_selection(text: &str) -> Option<Vec<String>> {
    for (i, _) in text.match_indices('{') {
        let mut stream =
            serde_json::Deserializer::from_str(&text[i..]).into_iter::<serde_json::Value>();
        if let Some(Ok(value)) = stream.next() {
            if let Some(list) = value.get("selected_memories").and_then(|v| v.as_array()) {
                return Some(
                    list.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect(),
                );
            }
        }
    }
    None
}

/// Map the model's names onto the paths of the manifest it was shown: exact, then without a
/// leading `./`, then with `.md` added. Names that were not in that manifest are dropped (with
/// a debug event): the model may only pick what it was shown.
fn resolve_names(names: Vec<String>, shown: &[&MemoryHeader]) -> Vec<String> {
    let known: HashMap<&str, &str> = shown
        .iter()
        .map(|h| (h.rel_path.as_str(), h.rel_path.as_str()))
        .collect();
    names
        .into_iter()
        .filter_map(|n| {
            let t = n.trim().trim_start_matches("./");
            let with_md = format!("{t}.md");
            let hit = known
                .get(t)
                .or_else(|| known.get(with_md.as_str()))
                .map(|p| (*p).to_owned());
            if hit.is_none() {
                tracing::debug!(name = %n, "selector named a memory that was not in its manifest; dropped");
            }
            hit
        })
        .collect()
}

#[async_trait]
impl Selector for LlmSelector {
    fn name(&self) -> &'static str {
        "model"
    }

    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let req = self.request(query, headers, ctx);
        let cancel = ctx.cancel.child_token();
        let call = self.model.complete(req, cancel.clone());
        let response = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return Err(SelectorError::Cancelled),
            r = tokio::time::timeout(self.config.timeout, call) => r,
        };
        let response = match response {
            Ok(Ok(r)) => r,
            Ok(Err(ModelError::Cancelled)) => return Err(SelectorError::Cancelled),
            Ok(Err(e)) => return Err(SelectorError::Model(e)),
            Err(_) => {
                cancel.cancel();
                return Err(SelectorError::Timeout(self.config.timeout));
            }
        };
        let text = response.text_content();
        let names = parse_selection(&text).ok_or_else(|| {
            SelectorError::InvalidResponse(memloop_text::truncate_utf8(&text, 200).to_owned())
        })?;
        Ok(resolve_names(names, &self.shown(headers, ctx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bare_fenced_and_embedded_json() {
        let want = Some(vec!["a.md".to_owned(), "b.md".to_owned()]);
        assert_eq!(
            parse_selection(r#"{"selected_memories":["a.md","b.md"]}"#),
            want
        );
        assert_eq!(
            parse_selection("```\n{\"selected_memories\": [\"a.md\", \"b.md\"]}\n```"),
            want
        );
        assert_eq!(
            parse_selection(r#"{"x": 1} then {"selected_memories": ["a.md", 3, "b.md"]}"#),
            want
        );
        assert_eq!(parse_selection(r#"{"selected_memories": "a.md"}"#), None);
        assert_eq!(parse_selection("{ unbalanced"), None);
    }
}
