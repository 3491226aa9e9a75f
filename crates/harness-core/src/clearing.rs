//! Tool-result clearing: the light step taken before a full compaction. Long tool-heavy sessions
//! fill the window with old tool outputs the model no longer needs; once the conversation
//! crosses a trigger, the content of every tool result older than the most recent `keep_recent`
//! is replaced with a short placeholder. The pairs themselves stay (the `tool_use` block, the
//! `tool_result` block with its id and error flag), so the conversation stays valid for every
//! provider. Compaction then runs only when clearing was not enough.

use crate::message::{ContentBlock, Message, Role, ToolResultContent};

/// When and how tool results are cleared (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultClearing {
    /// Clear once the conversation is above this fraction of the context window. Default 0.5.
    pub trigger_ratio: f64,
    /// How many of the most recent tool results keep their content. Default 3.
    pub keep_recent: usize,
    /// What a cleared result reads.
    pub placeholder: String,
}

impl Default for ToolResultClearing {
    fn default() -> Self {
        Self {
            trigger_ratio: 0.5,
            keep_recent: 3,
            placeholder: "[old tool result cleared to save context]".into(),
        }
    }
}

impl ToolResultClearing {
    /// The token count above which clearing runs, for a window of `window_tokens`.
    ///
    /// ```
    /// use memloop_core::clearing::ToolResultClearing;
    /// assert_eq!(ToolResultClearing::default().trigger_tokens(200_000), 100_000);
    /// ```
    pub fn trigger_tokens(&self, window_tokens: u64) -> u64 {
        let ratio = if self.trigger_ratio.is_finite() {
            self.trigger_ratio.clamp(0.0, 1.0)
        } else {
            1.0
        };
        (window_tokens as f64 * ratio) as u64
    }
}

/// What [`clear_old_tool_results`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClearReport {
    /// Tool results whose content was replaced now (already cleared ones are not counted).
    pub cleared: usize,
    /// Index of the first message changed, if any.
    pub first_changed: Option<usize>,
}

/// Replace the content of every tool result but the `keep_recent` newest with `placeholder`.
/// Ids, error flags and the `tool_use` blocks are untouched. The provider-reported usage of every
/// assistant message from the first change on is dropped (it counted the old content), so token
/// counting falls back to the last usage that is still true plus an estimate of the rest.
///
/// ```
/// use memloop_core::clearing::clear_old_tool_results;
/// use memloop_core::message::{ContentBlock, Message, Role};
/// use serde_json::json;
/// let mut msgs = Vec::new();
/// for i in 0..3 {
///     msgs.push(Message::new(Role::Assistant, vec![ContentBlock::tool_use(format!("t{i}"), "read", json!({}))]));
///     msgs.push(Message::new(Role::User, vec![ContentBlock::tool_result(format!("t{i}"), "x".repeat(1000), false)]));
/// }
/// let report = clear_old_tool_results(&mut msgs, 1, "[cleared]");
/// assert_eq!(report.cleared, 2);
/// assert!(matches!(&msgs[1].content[0], ContentBlock::ToolResult { content, .. } if content.text() == "[cleared]"));
/// assert!(matches!(&msgs[5].content[0], ContentBlock::ToolResult { content, .. } if content.text().len() == 1000));
/// ```
pub fn clear_old_tool_results(
    messages: &mut [Message],
    keep_recent: usize,
    placeholder: &str,
) -> ClearReport {
    let positions: Vec<(usize, usize)> = messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m.content
                .iter()
                .enumerate()
                .filter(|(_, b)| matches!(b, ContentBlock::ToolResult { .. }))
                .map(move |(j, _)| (i, j))
        })
        .collect();
    let old = positions.len().saturating_sub(keep_recent);
    let mut report = ClearReport::default();
    for &(i, j) in &positions[..old] {
        if let Some(ContentBlock::ToolResult { content, .. }) = messages[i].content.get_mut(j) {
            if matches!(content, ToolResultContent::Text(t) if t == placeholder) {
                continue;
            }
            *content = ToolResultContent::Text(placeholder.to_owned());
            report.cleared += 1;
            report.first_changed = Some(report.first_changed.map_or(i, |f| f.min(i)));
        }
    }
    if let Some(first) = report.first_changed {
        for m in &mut messages[first..] {
            if m.role == Role::Assistant {
                m.usage = None;
            }
        }
    }
    report
}
