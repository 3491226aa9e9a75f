//! The per-turn token check on a 500-message, ~150K-token conversation: the cached incremental
//! counter (what the agent uses) versus recounting every message.
#![allow(missing_docs, clippy::unwrap_used, clippy::print_stderr)]

use criterion::{BatchSize, Criterion, black_box, criterion_group, criterion_main};
use memloop::core::{
    message::{ContentBlock, Message, Role},
    tokens::{
        CharEstimator, ConversationTokens, Encoding, TiktokenCounter, TokenCounter,
        count_conversation_uncached,
    },
};
use std::sync::Arc;

/// 500 messages of ~300 tokens each (~150K tokens), alternating user / assistant with tool pairs.
fn conversation() -> Vec<Message> {
    let para = "The deployment pipeline builds the service, runs the integration suite against a \
                real database, and publishes the image only when every check is green. ";
    let mut out = Vec::with_capacity(500);
    for i in 0..500 {
        let text = format!("{i}: {}", para.repeat(11));
        let m = if i % 2 == 0 {
            Message::new(Role::User, vec![ContentBlock::text(text)])
        } else {
            Message::new(
                Role::Assistant,
                vec![
                    ContentBlock::text(text),
                    ContentBlock::tool_use(
                        format!("t{i}"),
                        "read",
                        serde_json::json!({"path": "src/lib.rs"}),
                    ),
                ],
            )
        };
        out.push(m);
    }
    out
}

fn bench(c: &mut Criterion) {
    let conv = conversation();
    let tiktoken: Arc<dyn TokenCounter> =
        Arc::new(TiktokenCounter::new(Encoding::O200kBase).unwrap());
    let chars: Arc<dyn TokenCounter> = Arc::new(CharEstimator);
    let total = count_conversation_uncached(tiktoken.as_ref(), &conv);
    eprintln!(
        "conversation: {} messages, {total} tokens (o200k_base)",
        conv.len()
    );

    let mut g = c.benchmark_group("per_turn_token_check_500_msgs");
    for (name, counter) in [("o200k", tiktoken.clone()), ("chars4", chars.clone())] {
        g.bench_function(format!("recount_all/{name}"), |b| {
            b.iter(|| count_conversation_uncached(counter.as_ref(), black_box(&conv)))
        });
        // Cached: the history is already counted; one new message arrived this turn.
        g.bench_function(format!("cached_incremental/{name}"), |b| {
            b.iter_batched(
                || {
                    let mut cached = ConversationTokens::new(counter.clone());
                    cached.count(&conv[..499]);
                    cached
                },
                |mut cached| {
                    let n = cached.count(black_box(&conv));
                    (n, cached) // dropped outside the timed routine
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
