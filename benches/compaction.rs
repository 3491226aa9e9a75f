//! Compaction costs on a long session: planning a session-memory compaction over a 2,000-message,
//! ~400K-token history, and the per-turn token check (cached incremental vs recounting).
//!
//! Run: `cargo bench --bench compaction -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs)] // criterion_group! generates an undocumented function.

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use memloop::compact::{
    SessionMemoryCompactConfig,
    strategies::{KeepBounds, plan_keep, plan_session_memory_compaction},
};
use memloop::core::{
    message::{ContentBlock, Message, Role},
    tokens::{CharEstimator, ConversationTokens, count_conversation_uncached, estimate_message},
};
use memloop::memory::session_notes::{CompactionNotes, DEFAULT_TEMPLATE};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// 500 exchanges of 4 messages (question, tool call, tool result, answer), ~200 tokens each.
fn history() -> Vec<Message> {
    let body = |c: char| c.to_string().repeat(800);
    let mut v = Vec::with_capacity(2_000);
    for i in 0..500 {
        let id = format!("call{i}");
        v.push(Message::user(format!("q{i} {}", body('q'))));
        v.push(
            Message::new(
                Role::Assistant,
                vec![
                    ContentBlock::text(body('t')),
                    ContentBlock::tool_use(&id, "read", json!({"path": format!("src/f{i}.rs")})),
                ],
            )
            .with_response_id(format!("r{i}")),
        );
        v.push(Message::new(
            Role::User,
            vec![ContentBlock::tool_result(&id, body('x'), false)],
        ));
        v.push(Message::assistant(format!("a{i} {}", body('a'))).with_response_id(format!("f{i}")));
    }
    v
}

fn bench_planning(c: &mut Criterion) {
    let h = history();
    let total: u64 = h.iter().map(|m| estimate_message(&CharEstimator, m)).sum();
    assert!((380_000..420_000).contains(&total), "{total}");
    let notes = CompactionNotes {
        content: DEFAULT_TEMPLATE.replace("_\n", "_\nsome notes\n"),
        path: "/tmp/summary.md".into(),
        is_template: false,
        last_summarized: Some(h[1_900].id.clone()),
        update_in_flight_since: None,
    };
    let cfg = SessionMemoryCompactConfig::default();
    let mut g = c.benchmark_group("compaction_plan_2000_msgs_400k_tokens");
    g.bench_function("session_memory_compaction (estimate + walk + build)", |b| {
        b.iter(|| {
            plan_session_memory_compaction(black_box(&h), &notes, &CharEstimator, &cfg, u64::MAX)
        })
    });
    let tokens: Vec<u64> = h
        .iter()
        .map(|m| estimate_message(&CharEstimator, m))
        .collect();
    let bounds = KeepBounds {
        min_tokens: 10_000,
        min_text_messages: 5,
        max_tokens: 40_000,
    };
    g.bench_function("keep_walk_only (cached estimates)", |b| {
        b.iter(|| plan_keep(black_box(&h), &tokens, Some(1_900), bounds))
    });
    g.finish();
}

fn bench_token_check(c: &mut Criterion) {
    let h = history();
    let mut g = c.benchmark_group("per_turn_token_check_2000_msgs");
    g.bench_function("cached_incremental (append 1 + count)", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let chunk = left.min(1_000);
                left -= chunk;
                let mut conv = h.clone();
                let mut counter = ConversationTokens::new(Arc::new(CharEstimator));
                counter.count(&conv);
                let mut extra: Vec<Message> = (0..chunk)
                    .map(|i| Message::user(format!("follow-up {i} {}", "y".repeat(200))))
                    .collect();
                let start = Instant::now();
                while let Some(m) = extra.pop() {
                    conv.push(m);
                    black_box(counter.count(&conv));
                }
                timed += start.elapsed();
            }
            timed
        })
    });
    g.bench_function("recount_everything", |b| {
        b.iter(|| count_conversation_uncached(&CharEstimator, black_box(&h)))
    });
    g.finish();
}

criterion_group!(benches, bench_planning, bench_token_check);
criterion_main!(benches);
