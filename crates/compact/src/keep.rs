//! Which recent messages survive a session-memory compaction: start right after the last
//! summarized message, walk back (never past the previous compaction) until the token and
//! text-message minimums are met or the token maximum is reached, then move the start back so
//! tool pairs and split assistant records stay whole.

use memloop_core::message::{Message, MessageKind, Role};
use std::collections::HashSet;

/// The bounds of the keep-index walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepBounds {
    /// Keep at least this many tokens (10,000).
    pub min_tokens: u64,
    /// Keep at least this many messages with text (5).
    pub min_text_messages: usize,
    /// Keep at most this many tokens (40,000).
    pub max_tokens: u64,
}

/// The decision: keep `messages[start..]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepPlan {
    /// First kept message.
    pub start: usize,
    /// Where the walk stopped before the invariant adjustment.
    pub walk_start: usize,
    /// The walk never goes below this index (right after the previous compaction's boundary
    /// and summary).
    pub floor: usize,
    /// Estimated tokens kept.
    pub tokens: u64,
    /// Kept messages with text.
    pub text_messages: usize,
}

/// The first index after the last compaction boundary and the summary messages right after it
/// (0 when the conversation was never compacted). The new notes supersede the old summary.
pub fn compaction_floor(messages: &[Message]) -> usize {
    let Some(b) = messages.iter().rposition(Message::is_compact_boundary) else {
        return 0;
    };
    let mut floor = b + 1;
    while messages
        .get(floor)
        .is_some_and(|m| m.meta.kind == MessageKind::CompactSummary)
    {
        floor += 1;
    }
    floor
}

/// Plan which messages to keep.
///
/// `tokens[i]` is the estimate of `messages[i]`; `last_summarized` is the index of the newest
/// message the notes cover (`None` = unknown: start at the end). The walk adds older messages
/// while that stays within `max_tokens` (stricter than "until max is reached": the walk itself
/// never overshoots), stops once both minimums are met, and never passes the previous boundary.
/// The invariant adjustment may then move the start further back: a kept tool_result pulls in
/// its tool_use, and assistant records sharing a response id stay together. That is the only
/// way the kept tokens exceed `max_tokens`, besides an unsummarized tail that is already larger
/// (those messages are not covered by the notes, so they are all kept) and a newest message that
/// alone is larger (it is always kept).
pub fn plan_keep(
    messages: &[Message],
    tokens: &[u64],
    last_summarized: Option<usize>,
    bounds: KeepBounds,
) -> KeepPlan {
    let n = messages.len().min(tokens.len());
    let floor = compaction_floor(&messages[..n]);
    let mut start = last_summarized.map_or(n, |i| (i + 1).min(n)).max(floor);
    let mut kept: u64 = tokens[start..n].iter().sum();
    let mut text = messages[start..n].iter().filter(|m| m.has_text()).count();
    let done = |kept: u64, text: usize| {
        kept >= bounds.max_tokens || (kept >= bounds.min_tokens && text >= bounds.min_text_messages)
    };
    while !done(kept, text) && start > floor {
        let t = tokens[start - 1];
        // Never overshoot, except that the newest message is always kept: it is the request
        // being answered and no notes cover it.
        if kept + t > bounds.max_tokens && start < n {
            break;
        }
        start -= 1;
        kept += t;
        if messages[start].has_text() {
            text += 1;
        }
    }
    let walk_start = start;
    let start = adjust_for_invariants(&messages[..n], start, floor);
    KeepPlan {
        start,
        walk_start,
        floor,
        tokens: tokens[start..n].iter().sum(),
        text_messages: messages[start..n].iter().filter(|m| m.has_text()).count(),
    }
}

/// Move `start` back until every kept tool_result has its tool_use kept and no response-id
/// group is split, never below `floor`.
pub fn adjust_for_invariants(messages: &[Message], mut start: usize, floor: usize) -> usize {
    loop {
        let before = start;
        let kept = &messages[start..];
        let used: HashSet<&str> = kept
            .iter()
            .flat_map(|m| m.tool_uses().map(|(id, _, _)| id))
            .collect();
        let mut missing: HashSet<&str> = kept
            .iter()
            .flat_map(Message::tool_result_ids)
            .filter(|id| !used.contains(id))
            .collect();
        let mut j = start;
        while !missing.is_empty() && j > floor {
            j -= 1;
            let mut hit = false;
            for (id, _, _) in messages[j].tool_uses() {
                hit |= missing.remove(id);
            }
            if hit {
                start = j;
            }
        }
        while start > floor
            && start < messages.len()
            && same_response(&messages[start - 1], &messages[start])
        {
            start -= 1;
        }
        if start == before {
            return start;
        }
    }
}

/// Whether `a` and `b` are assistant records of one provider response (split records).
pub(crate) fn same_response(a: &Message, b: &Message) -> bool {
    a.role == Role::Assistant
        && b.role == Role::Assistant
        && a.meta.response_id.is_some()
        && a.meta.response_id == b.meta.response_id
}

#[cfg(test)]
mod tests {
    use super::*;
    use memloop_core::{
        message::ContentBlock,
        tokens::{CharEstimator, estimate_message},
    };

    const BOUNDS: KeepBounds = KeepBounds {
        min_tokens: 100,
        min_text_messages: 2,
        max_tokens: 400,
    };

    fn plan(messages: &[Message], last: Option<usize>) -> KeepPlan {
        let tokens: Vec<u64> = messages
            .iter()
            .map(|m| estimate_message(&CharEstimator, m))
            .collect();
        plan_keep(messages, &tokens, last, BOUNDS)
    }

    #[test]
    fn a_huge_newest_message_is_still_kept() {
        let conv = vec![
            Message::user("a".repeat(40)),
            Message::assistant("b".repeat(40)),
            Message::user("c".repeat(4_000)),
        ];
        let p = plan(&conv, None);
        assert_eq!(p.start, 2);
        assert_eq!(p.tokens, 1_000);
        // Nothing to keep at all: no panic.
        assert_eq!(plan(&[], None).start, 0);
        // Even when summarized, the newest message is kept while the minimums are unmet.
        assert_eq!(plan(&conv, Some(2)).start, 2);
    }

    #[test]
    fn the_walk_stops_at_the_previous_boundary_and_pulls_in_tool_uses() {
        let conv = vec![
            Message::user("old").with_kind(MessageKind::CompactBoundary),
            Message::user("old notes").with_kind(MessageKind::CompactSummary),
            Message::user("q".repeat(40)),
            Message::new(
                Role::Assistant,
                vec![ContentBlock::tool_use(
                    "t1",
                    "read",
                    serde_json::json!({"pad": "p".repeat(790)}),
                )],
            )
            .with_response_id("r1"),
            Message::new(
                Role::User,
                vec![ContentBlock::tool_result("t1", "x".repeat(1_000), false)],
            ),
            Message::assistant("done").with_response_id("r2"),
        ];
        assert_eq!(compaction_floor(&conv), 2);
        // Result (250) + "done" (1) fit; the tool_use (200) would pass 400: the walk stops at
        // the result and the adjustment pulls its tool_use in (451 tokens, over the cap).
        for last in [None, Some(3)] {
            let p = plan(&conv, last);
            assert_eq!((p.walk_start, p.start, p.floor), (4, 3, 2), "{last:?}");
            assert!(p.tokens > BOUNDS.max_tokens);
        }
        // With room, the walk reaches the boundary and stops there.
        let mut roomy = conv.clone();
        roomy[4] = Message::new(
            Role::User,
            vec![ContentBlock::tool_result("t1", "ok", false)],
        );
        roomy[3] = Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("t1", "read", serde_json::json!({}))],
        )
        .with_response_id("r1");
        let p = plan(&roomy, None);
        assert_eq!(p.start, 2);
    }
}
