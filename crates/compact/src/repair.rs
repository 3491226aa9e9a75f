//! Conversation repair passes (opt-in). Each pass is a small function
//! `fn(Vec<Message>) -> (Vec<Message>, Vec<Issue>)` fixing one kind of damage; [`repair`] runs
//! them in a safe order and [`repair_fn`] packages that for `AgentBuilder::repair`.
//!
//! Passes follow the provider view of `memloop_core::invariants::provider_view`: compaction boundary markers
//! are ignored, consecutive user records form one user message, consecutive assistant records
//! with one response id form one response.

use crate::keep::same_response;
use memloop_core::{
    invariants::RepairFn,
    message::{ContentBlock, Message, Role},
};
use std::collections::HashSet;
use std::sync::Arc;

/// What a pass changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issue {
    /// An empty message (or empty text blocks) removed.
    DroppedEmptyMessage {
        /// Id of the removed message.
        id: String,
    },
    /// A tool_result answering no tool_use of the previous response removed.
    DroppedOrphanToolResult {
        /// The tool_use id it claimed to answer.
        id: String,
    },
    /// A second answer to the same tool_use removed.
    DroppedDuplicateToolResult {
        /// The tool_use id.
        id: String,
    },
    /// An error tool_result added for an unanswered tool_use.
    AddedMissingToolResult {
        /// The tool_use id.
        id: String,
    },
    /// Two assistant responses in a row merged into one.
    MergedConsecutiveAssistant {
        /// Id of the message merged into its predecessor.
        id: String,
    },
    /// A user message inserted before a leading assistant message.
    InsertedLeadingUser,
}

/// The text of the tool_result added for an unanswered tool_use.
pub const MISSING_RESULT_TEXT: &str =
    "This tool call was interrupted and produced no result. Do not assume it ran.";
/// The text of the user message inserted before a leading assistant message.
pub const LEADING_USER_TEXT: &str = "[The start of this conversation is not available.]";

/// A repair pass.
pub type Pass = fn(Vec<Message>) -> (Vec<Message>, Vec<Issue>);

/// The passes [`repair`] runs, in order.
pub const PASSES: [Pass; 6] = [
    drop_empty_messages,
    drop_orphan_tool_results,
    merge_consecutive_assistant,
    add_missing_tool_results,
    ensure_user_first,
    drop_empty_messages,
];

/// Run every pass.
///
/// ```
/// use memloop_compact::repair::repair;
/// use memloop_core::{invariants::check_invariants, message::{ContentBlock, Message, Role}};
/// let broken = vec![
///     Message::user("go"),
///     Message::new(Role::Assistant, vec![ContentBlock::tool_use("t1", "run", serde_json::json!({}))]),
///     Message::new(Role::User, vec![ContentBlock::tool_result("zz", "stray", false)]),
/// ];
/// let (fixed, issues) = repair(broken);
/// assert!(check_invariants(&fixed).is_ok());
/// assert_eq!(issues.len(), 2);
/// ```
pub fn repair(messages: Vec<Message>) -> (Vec<Message>, Vec<Issue>) {
    PASSES
        .iter()
        .fold((messages, Vec::new()), |(m, mut all), pass| {
            let (m, issues) = pass(m);
            all.extend(issues);
            (m, all)
        })
}

/// [`repair`] as a [`RepairFn`] for `AgentBuilder::repair`; issues are logged with `tracing`.
pub fn repair_fn() -> RepairFn {
    Arc::new(|messages| {
        let (fixed, issues) = repair(messages);
        for issue in &issues {
            tracing::warn!(?issue, "repaired the conversation");
        }
        fixed
    })
}

fn is_blank_text(b: &ContentBlock) -> bool {
    b.as_text().is_some_and(|t| t.trim().is_empty())
}

/// Remove blank text blocks, then messages left without content (boundary markers stay).
pub fn drop_empty_messages(messages: Vec<Message>) -> (Vec<Message>, Vec<Issue>) {
    let mut issues = Vec::new();
    let mut out = Vec::with_capacity(messages.len());
    for mut m in messages {
        if m.is_compact_boundary() {
            out.push(m);
            continue;
        }
        m.content.retain(|b| !is_blank_text(b));
        if m.content.is_empty() {
            issues.push(Issue::DroppedEmptyMessage {
                id: m.id.to_string(),
            });
        } else {
            out.push(m);
        }
    }
    (out, issues)
}

/// Remove tool_results that answer nothing in the previous response, and repeated answers.
pub fn drop_orphan_tool_results(messages: Vec<Message>) -> (Vec<Message>, Vec<Issue>) {
    let mut issues = Vec::new();
    let mut asked: HashSet<String> = HashSet::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut prev: Option<Role> = None;
    let mut out = Vec::with_capacity(messages.len());
    for mut m in messages {
        if m.is_compact_boundary() {
            out.push(m);
            continue;
        }
        match m.role {
            Role::Assistant => {
                if prev != Some(Role::Assistant) {
                    asked.clear();
                }
                answered.clear();
                asked.extend(m.tool_uses().map(|(id, _, _)| id.to_owned()));
            }
            Role::User => {
                if prev != Some(Role::Assistant) && prev != Some(Role::User) {
                    asked.clear();
                }
                m.content.retain(|b| match b {
                    ContentBlock::ToolResult { tool_use_id, .. } => {
                        let id = tool_use_id.clone();
                        if !asked.contains(&id) {
                            issues.push(Issue::DroppedOrphanToolResult { id });
                            false
                        } else if !answered.insert(id.clone()) {
                            issues.push(Issue::DroppedDuplicateToolResult { id });
                            false
                        } else {
                            true
                        }
                    }
                    _ => true,
                });
            }
        }
        prev = Some(m.role);
        out.push(m);
    }
    (out, issues)
}

/// Merge an assistant message into the previous one when both are assistant records of
/// different responses (providers reject two assistant turns in a row).
pub fn merge_consecutive_assistant(messages: Vec<Message>) -> (Vec<Message>, Vec<Issue>) {
    let mut issues = Vec::new();
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        if m.role == Role::Assistant {
            if let Some(last) = out.last_mut() {
                if last.role == Role::Assistant && !same_response(last, &m) {
                    issues.push(Issue::MergedConsecutiveAssistant {
                        id: m.id.to_string(),
                    });
                    last.content.extend(m.content);
                    if m.usage.is_some() {
                        last.usage = m.usage;
                    }
                    continue;
                }
            }
        }
        out.push(m);
    }
    (out, issues)
}

/// Answer every unanswered tool_use with an error tool_result in the next user message
/// (inserting one when the response is followed by no user message).
pub fn add_missing_tool_results(mut messages: Vec<Message>) -> (Vec<Message>, Vec<Issue>) {
    let mut issues = Vec::new();
    let live: Vec<usize> = (0..messages.len())
        .filter(|&i| !messages[i].is_compact_boundary())
        .collect();
    // Runs of same-role messages over the live indices.
    let mut runs: Vec<(Role, Vec<usize>)> = Vec::new();
    for &i in &live {
        match runs.last_mut() {
            Some((role, idx)) if *role == messages[i].role => idx.push(i),
            _ => runs.push((messages[i].role, vec![i])),
        }
    }
    // (insert position or existing user message, missing ids)
    let mut fixes: Vec<(usize, bool, Vec<String>)> = Vec::new();
    for (k, (role, idx)) in runs.iter().enumerate() {
        if *role != Role::Assistant {
            continue;
        }
        let uses: Vec<String> = idx
            .iter()
            .flat_map(|&i| messages[i].tool_uses().map(|(id, _, _)| id.to_owned()))
            .collect();
        let (answered, target): (HashSet<String>, Option<usize>) = match runs.get(k + 1) {
            Some((Role::User, uidx)) => (
                uidx.iter()
                    .flat_map(|&i| messages[i].tool_result_ids().map(str::to_owned))
                    .collect(),
                uidx.first().copied(),
            ),
            _ => (HashSet::new(), None),
        };
        let missing: Vec<String> = uses
            .into_iter()
            .filter(|id| !answered.contains(id))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let last = idx.last().copied().unwrap_or(0);
        match target {
            Some(t) => fixes.push((t, true, missing)),
            None => fixes.push((last + 1, false, missing)),
        }
    }
    for (pos, existing, missing) in fixes.into_iter().rev() {
        let blocks: Vec<ContentBlock> = missing
            .iter()
            .map(|id| ContentBlock::tool_result(id, MISSING_RESULT_TEXT, true))
            .collect();
        issues.extend(
            missing
                .into_iter()
                .map(|id| Issue::AddedMissingToolResult { id }),
        );
        if existing {
            let m = &mut messages[pos];
            let rest = std::mem::take(&mut m.content);
            m.content = blocks;
            m.content.extend(rest);
        } else {
            messages.insert(pos.min(messages.len()), Message::new(Role::User, blocks));
        }
    }
    issues.reverse();
    (messages, issues)
}

/// Insert a user message when the conversation starts with the assistant.
pub fn ensure_user_first(mut messages: Vec<Message>) -> (Vec<Message>, Vec<Issue>) {
    match messages.iter().position(|m| !m.is_compact_boundary()) {
        Some(i) if messages[i].role == Role::Assistant => {
            messages.insert(i, Message::user(LEADING_USER_TEXT));
            (messages, vec![Issue::InsertedLeadingUser])
        }
        _ => (messages, Vec::new()),
    }
}
