//! Property tests of session-memory compaction over random conversations with tool pairs and
//! split records (assistant records sharing one response id).
//!
//! Documented exception to the 40K cap: the invariant adjustment may pull in one more atomic
//! unit (an assistant response with the tool results answering it) when the walk stopped inside
//! it; an unsummarized tail larger than the cap is kept whole (the notes do not cover it); and the
//! newest message is always kept, even when it alone is larger than the cap.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use memloop_compact::{SessionMemoryCompactConfig, strategies::plan_session_memory_compaction};
use memloop_core::{
    invariants::check_invariants,
    message::{ContentBlock, Message, MessageKind, Role},
    tokens::{CharEstimator, estimate_message},
};
use memloop_session_notes::CompactionNotes;
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
struct Round {
    split: bool,
    results: Vec<usize>,
}

#[derive(Debug, Clone)]
struct Turn {
    user: usize,
    rounds: Vec<Round>,
    last: usize,
}

fn result_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 4usize..8_000,
        3 => 8_000usize..40_000,
        1 => 100_000usize..220_000, // a single pair bigger than the 40K-token cap
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    let round = (any::<bool>(), prop::collection::vec(result_size(), 1..4))
        .prop_map(|(split, results)| Round { split, results });
    (
        1usize..6_000,
        prop::collection::vec(round, 0..4),
        0usize..6_000,
    )
        .prop_map(|(user, rounds, last)| Turn { user, rounds, last })
}

fn build(turns: &[Turn], compacted_before: bool) -> Vec<Message> {
    let mut v = Vec::new();
    if compacted_before {
        v.push(Message::user("boundary").with_kind(MessageKind::CompactBoundary));
        v.push(Message::user("old summary").with_kind(MessageKind::CompactSummary));
    }
    let mut n = 0;
    for (ti, t) in turns.iter().enumerate() {
        v.push(Message::user("u".repeat(t.user)));
        for r in &t.rounds {
            n += 1;
            let rid = format!("resp{n}");
            let ids: Vec<String> = (0..r.results.len())
                .map(|k| format!("call{n}_{k}"))
                .collect();
            let uses: Vec<ContentBlock> = ids
                .iter()
                .map(|id| ContentBlock::tool_use(id, "read", json!({"path": id})))
                .collect();
            if r.split {
                v.push(
                    Message::new(
                        Role::Assistant,
                        vec![ContentBlock::Thinking {
                            thinking: "t".repeat(400),
                            signature: None,
                        }],
                    )
                    .with_response_id(&rid),
                );
                // One record per tool call, all with the same response id.
                for u in uses {
                    v.push(Message::new(Role::Assistant, vec![u]).with_response_id(&rid));
                }
            } else {
                v.push(Message::new(Role::Assistant, uses).with_response_id(&rid));
            }
            let results = ids
                .iter()
                .zip(&r.results)
                .map(|(id, size)| ContentBlock::tool_result(id, "r".repeat(*size), false))
                .collect();
            v.push(Message::new(Role::User, results));
        }
        if t.last > 0 || ti + 1 < turns.len() {
            v.push(
                Message::assistant("a".repeat(t.last.max(1)))
                    .with_response_id(format!("final{ti}")),
            );
        }
    }
    v
}

fn same_response(a: &Message, b: &Message) -> bool {
    a.role == Role::Assistant
        && b.role == Role::Assistant
        && a.meta.response_id.is_some()
        && a.meta.response_id == b.meta.response_id
}

/// Largest atomic unit: an assistant response (all its records) plus the user messages after it.
fn max_unit(messages: &[Message], tokens: &[u64]) -> u64 {
    let mut best = 0;
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role != Role::Assistant {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < messages.len()
            && (messages[j].role == Role::User || same_response(&messages[j - 1], &messages[j]))
        {
            if messages[j].role == Role::Assistant
                || messages[j].tool_result_ids().next().is_some()
                || j == i + 1
            {
                j += 1;
            } else {
                break;
            }
        }
        best = best.max(tokens[i..j].iter().sum());
        i = j.max(i + 1);
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn session_memory_compaction_keeps_invariants_and_bounds(
        turns in prop::collection::vec(turn(), 1..14),
        compacted_before in any::<bool>(),
        summarized_frac in prop::option::of(0.0f64..1.0),
    ) {
        let messages = build(&turns, compacted_before);
        prop_assume!(check_invariants(&messages).is_ok());
        let tokens: Vec<u64> = messages.iter().map(|m| estimate_message(&CharEstimator, m)).collect();
        let last = summarized_frac.map(|f| ((messages.len() - 1) as f64 * f) as usize);
        let notes = CompactionNotes {
            content: "# Current State\n_s_\nworking\n".into(),
            path: "/notes/summary.md".into(),
            is_template: false,
            last_summarized: last.map(|i| messages[i].id.clone()),
            update_in_flight_since: None,
        };
        let cfg = SessionMemoryCompactConfig::default();
        let c = plan_session_memory_compaction(&messages, &notes, &CharEstimator, &cfg, u64::MAX);
        let c = match c {
            Ok(c) => c,
            Err(e) => return Err(TestCaseError::fail(format!("declined: {e}"))),
        };
        let p = c.plan;
        // 1. Invariants hold on the result.
        prop_assert!(check_invariants(&c.messages).is_ok());
        prop_assert_eq!(c.messages.len(), messages.len() - p.start + 2);
        // Never past the previous boundary and its summary.
        let floor = if compacted_before { 2 } else { 0 };
        prop_assert_eq!(p.floor, floor);
        prop_assert!(p.start >= floor);
        // Nothing the notes do not cover is dropped.
        if let Some(i) = last {
            prop_assert!(p.start <= (i + 1).max(floor));
        }
        // Response-id groups are never split.
        if p.start > floor {
            prop_assert!(!same_response(&messages[p.start - 1], &messages[p.start]));
        }
        let kept: u64 = tokens[p.start..].iter().sum();
        prop_assert_eq!(kept, p.tokens);
        // 2. Max: within 40K unless the unsummarized tail already was, or one unit forced more.
        let tail_start = last.map_or(messages.len(), |i| i + 1).max(floor);
        let tail: u64 = tokens[tail_start..].iter().sum();
        if tail <= cfg.max_tokens {
            let walked: u64 = tokens[p.walk_start..].iter().sum();
            // The newest message is always kept, even when it alone is over the cap.
            prop_assert!(walked <= cfg.max_tokens.max(tokens[messages.len() - 1]));
            if p.start == p.walk_start {
                prop_assert!(kept <= cfg.max_tokens.max(tokens[messages.len() - 1]));
            } else {
                prop_assert!(
                    kept <= cfg.max_tokens.max(tokens[messages.len() - 1]) + max_unit(&messages, &tokens)
                );
            }
        }
        // 3. Minimums: met unless the history ran out or the next message would pass the max.
        if p.tokens < cfg.min_tokens || p.text_messages < cfg.min_text_messages {
            let walked: u64 = tokens[p.walk_start..].iter().sum();
            prop_assert!(
                p.walk_start == floor || walked + tokens[p.walk_start - 1] > cfg.max_tokens,
                "minimums unmet with history left: {:?}", p
            );
        }
    }
}
