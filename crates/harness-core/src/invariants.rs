//! The conversation invariant checker: catches a broken tool pairing or role order before the
//! provider rejects the request.
//!
//! Run before every model request and after every compaction. It validates the *provider view*
//! of a conversation ([`provider_view`]): compaction boundary markers removed, consecutive user
//! records merged (tool results first), and consecutive assistant records that share a response id
//! (split streaming records) merged. On that view:
//!
//! - the first message is from the user and roles alternate;
//! - every tool_use id is unique and answered by exactly one tool_result in the next message;
//! - no tool_result answers a tool_use that is not in the message right before it.

use crate::message::{ContentBlock, Message, MessageKind, Role};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A conversation repair pass the host may opt into (see `memloop-compact`'s repair passes).
pub type RepairFn = Arc<dyn Fn(Vec<Message>) -> Vec<Message> + Send + Sync>;

/// One broken invariant. Indices refer to the provider view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// The conversation is empty.
    #[error("the conversation has no messages")]
    Empty,
    /// The first message is not from the user.
    #[error("the first message (index 0) is from the assistant")]
    FirstNotUser,
    /// Two assistant records in a row that are not one split response.
    #[error("messages {index} and {} are both from the assistant and are not one response", index + 1)]
    ConsecutiveAssistant {
        /// Index of the first of the two.
        index: usize,
    },
    /// A message with no content blocks.
    #[error("message {index} has no content")]
    EmptyMessage {
        /// Index.
        index: usize,
    },
    /// A tool_use with no tool_result in the next message.
    #[error("tool_use {id} (message {index}) has no tool_result in the next message")]
    MissingToolResult {
        /// The tool_use id.
        id: String,
        /// Index of the assistant message.
        index: usize,
    },
    /// A tool_use answered more than once.
    #[error("tool_use {id} is answered {count} times")]
    DuplicateToolResult {
        /// The tool_use id.
        id: String,
        /// How many answers.
        count: usize,
    },
    /// Two tool_use blocks with the same id.
    #[error("tool_use id {id} is used twice")]
    DuplicateToolUseId {
        /// The id.
        id: String,
    },
    /// A tool_result that answers nothing in the previous message.
    #[error("tool_result for {id} (message {index}) has no tool_use in the previous message")]
    OrphanToolResult {
        /// The tool_use id it claims to answer.
        id: String,
        /// Index of the user message.
        index: usize,
    },
}

/// All violations found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid conversation: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvariantError(pub Vec<Violation>);

/// The conversation as it is sent to a provider (see the module docs).
pub fn provider_view(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        if m.meta.kind == MessageKind::CompactBoundary {
            continue;
        }
        if let Some(last) = out.last_mut() {
            let same_response = m.role == Role::Assistant
                && last.role == Role::Assistant
                && m.meta.response_id.is_some()
                && last.meta.response_id == m.meta.response_id;
            if m.role == Role::User && last.role == Role::User {
                // Tool results must lead a user message.
                let (mut results, mut rest): (Vec<_>, Vec<_>) = last
                    .content
                    .drain(..)
                    .chain(m.content.iter().cloned())
                    .partition(|b| matches!(b, ContentBlock::ToolResult { .. }));
                results.append(&mut rest);
                last.content = results;
                last.meta
                    .files_written
                    .extend(m.meta.files_written.iter().cloned());
                continue;
            }
            if same_response {
                last.content.extend(m.content.iter().cloned());
                if m.usage.is_some() {
                    last.usage = m.usage;
                }
                continue;
            }
        }
        out.push(m.clone());
    }
    out
}

/// Check the invariants; `Ok` when the conversation can be sent as is.
///
/// ```
/// use memloop_core::{invariants::{Violation, check_invariants}, message::{ContentBlock, Message, Role}};
/// let ok = vec![
///     Message::user("read a.txt"),
///     Message::new(Role::Assistant, vec![ContentBlock::tool_use("t1", "read", serde_json::json!({}))]),
///     Message::new(Role::User, vec![ContentBlock::tool_result("t1", "contents", false)]),
/// ];
/// assert!(check_invariants(&ok).is_ok());
/// let broken = &ok[..2];
/// let err = check_invariants(broken).unwrap_err();
/// assert!(matches!(err.0[0], Violation::MissingToolResult { .. }));
/// ```
pub fn check_invariants(messages: &[Message]) -> Result<(), InvariantError> {
    let view = provider_view(messages);
    let mut violations = Vec::new();
    if view.is_empty() {
        return Err(InvariantError(vec![Violation::Empty]));
    }
    if view[0].role != Role::User {
        violations.push(Violation::FirstNotUser);
    }
    let mut seen_ids = HashSet::new();
    for (i, m) in view.iter().enumerate() {
        if m.content.is_empty() {
            violations.push(Violation::EmptyMessage { index: i });
        }
        if i > 0 && m.role == Role::Assistant && view[i - 1].role == Role::Assistant {
            violations.push(Violation::ConsecutiveAssistant { index: i - 1 });
        }
        match m.role {
            Role::Assistant => {
                let next_results: HashMap<&str, usize> = match view.get(i + 1) {
                    Some(n) if n.role == Role::User => {
                        let mut counts = HashMap::new();
                        for id in n.tool_result_ids() {
                            *counts.entry(id).or_insert(0) += 1;
                        }
                        counts
                    }
                    _ => HashMap::new(),
                };
                for (id, _, _) in m.tool_uses() {
                    if !seen_ids.insert(id.to_owned()) {
                        violations.push(Violation::DuplicateToolUseId { id: id.to_owned() });
                    }
                    match next_results.get(id) {
                        None => violations.push(Violation::MissingToolResult {
                            id: id.to_owned(),
                            index: i,
                        }),
                        Some(&n) if n > 1 => violations.push(Violation::DuplicateToolResult {
                            id: id.to_owned(),
                            count: n,
                        }),
                        Some(_) => {}
                    }
                }
            }
            Role::User => {
                let asked: HashSet<&str> = match i.checked_sub(1).map(|p| &view[p]) {
                    Some(prev) if prev.role == Role::Assistant => {
                        prev.tool_uses().map(|(id, _, _)| id).collect()
                    }
                    _ => HashSet::new(),
                };
                for id in m.tool_result_ids() {
                    if !asked.contains(id) {
                        violations.push(Violation::OrphanToolResult {
                            id: id.to_owned(),
                            index: i,
                        });
                    }
                }
            }
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(InvariantError(violations))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn call(id: &str) -> ContentBlock {
        ContentBlock::tool_use(id, "read", json!({"path": "a"}))
    }
    fn result(id: &str) -> ContentBlock {
        ContentBlock::tool_result(id, "ok", false)
    }

    #[test]
    fn split_records_and_boundaries_are_merged() {
        let conv = vec![
            Message::user("x").with_kind(MessageKind::CompactBoundary),
            Message::user("summary"),
            Message::user("question"),
            Message::new(
                Role::Assistant,
                vec![ContentBlock::Thinking {
                    thinking: "hm".into(),
                    signature: None,
                }],
            )
            .with_response_id("r1"),
            Message::new(Role::Assistant, vec![call("t1")]).with_response_id("r1"),
            Message::new(Role::User, vec![result("t1")]),
            Message::user("<system-reminder>memories</system-reminder>"),
            Message::assistant("done").with_response_id("r2"),
        ];
        assert_eq!(check_invariants(&conv), Ok(()));
        let view = provider_view(&conv);
        assert_eq!(view.len(), 4);
        assert!(matches!(
            view[2].content[0],
            ContentBlock::ToolResult { .. }
        ));
    }

    #[test]
    fn reports_every_violation() {
        let conv = vec![
            Message::new(Role::Assistant, vec![call("t1")]).with_response_id("a"),
            Message::new(Role::User, vec![result("t2"), result("t9")]),
            Message::new(Role::Assistant, vec![call("t3"), call("t3")]).with_response_id("b"),
            Message::new(Role::User, vec![result("t3"), result("t3")]),
            Message::assistant("x").with_response_id("c"),
            Message::assistant("y").with_response_id("d"),
        ];
        let err = check_invariants(&conv).unwrap_err();
        assert_eq!(
            err.0,
            vec![
                Violation::FirstNotUser,
                Violation::MissingToolResult {
                    id: "t1".into(),
                    index: 0
                },
                Violation::OrphanToolResult {
                    id: "t2".into(),
                    index: 1
                },
                Violation::OrphanToolResult {
                    id: "t9".into(),
                    index: 1
                },
                Violation::DuplicateToolResult {
                    id: "t3".into(),
                    count: 2
                },
                Violation::DuplicateToolUseId { id: "t3".into() },
                Violation::DuplicateToolResult {
                    id: "t3".into(),
                    count: 2
                },
                Violation::ConsecutiveAssistant { index: 4 },
            ]
        );
    }
}
