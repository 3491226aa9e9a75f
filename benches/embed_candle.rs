//! Embeddings per second of the in-process model (all-MiniLM-L6-v2, and all-mpnet-base-v2 when
//! `MEMLOOP_TEST_MPNET_DIR` names it) on this machine's CPU:
//! a batch of 32 short sentences (memory descriptions, 8 to 14 words), 128 memories of one to
//! twelve sentences in one call (a cold index), and one short query alone (what a recall pays
//! before it can rank).
//!
//! ```text
//! MEMLOOP_TEST_MINILM_DIR=~/.cache/memloop/models/all-MiniLM-L6-v2 \
//!   cargo bench --features candle --bench embed_candle -- --warm-up-time 2 --measurement-time 10
//! ```
//!
//! Without `MEMLOOP_TEST_MINILM_DIR` / `MEMLOOP_TEST_MPNET_DIR` (see `.ci/run` for fetching the
//! models) it prints a notice and measures nothing for that model.

#![allow(missing_docs, clippy::unwrap_used, clippy::print_stderr)] // bench harness code

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memloop::candle::CandleEmbedder;
use memloop::core::embed::Embedder;

const TOPICS: [&str; 8] = [
    "deploys",
    "the billing service",
    "integration tests",
    "the staging database",
    "code review",
    "on-call handovers",
    "the mobile release",
    "API latency",
];
const HABITS: [&str; 4] = [
    "prefers short answers about",
    "wants a checklist before touching",
    "asked twice to never mock",
    "keeps notes in the wiki about",
];

/// 32 distinct short sentences.
fn sentences() -> Vec<String> {
    (0..32)
        .map(|i| {
            format!(
                "The user {} {} on Tuesdays.",
                HABITS[i % 4],
                TOPICS[(i / 4) % 8]
            )
        })
        .collect()
}

/// 128 memories of mixed length, as a real memory dir holds: one to twelve sentences each,
/// in an order unrelated to their length (a cold index embeds them in one call).
fn mixed() -> Vec<String> {
    let all = sentences();
    (0..128)
        .map(|i| {
            let n = 1 + (i * 7) % 12;
            (0..n)
                .map(|k| all[(i + k) % all.len()].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let models = [
        ("embed_candle", "MEMLOOP_TEST_MINILM_DIR"),
        ("embed_candle_mpnet", "MEMLOOP_TEST_MPNET_DIR"),
    ];
    for (group, var) in models {
        match std::env::var_os(var).filter(|d| !d.is_empty()) {
            Some(dir) => bench_model(c, group, &CandleEmbedder::load(dir).unwrap()),
            None => eprintln!("{group}: {var} is unset; nothing to measure"),
        }
    }
}

fn bench_model(c: &mut Criterion, group: &str, embedder: &CandleEmbedder) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let batch = sentences();
    let query = vec!["what does the user want before touching the database".to_owned()];

    let mut group = c.benchmark_group(group);
    group.sample_size(20);
    group.throughput(Throughput::Elements(batch.len() as u64));
    group.bench_function("batch_32_short", |b| {
        b.to_async(&rt)
            .iter(|| async { embedder.embed(&batch).await.unwrap() })
    });
    let mixed = mixed();
    group.throughput(Throughput::Elements(mixed.len() as u64));
    group.bench_function("cold_128_mixed_length", |b| {
        b.to_async(&rt)
            .iter(|| async { embedder.embed(&mixed).await.unwrap() })
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("query_1_short", |b| {
        b.to_async(&rt)
            .iter(|| async { embedder.embed(&query).await.unwrap() })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
