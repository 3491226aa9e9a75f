#![allow(missing_docs)] // criterion_group! generates undocumented items
//! The secret filter's cost: `SecretFilter::find` and `redact_secrets` over 1 KiB of ordinary
//! memory text (prose in several languages that talks about passwords without giving one, so
//! every rule runs to the end). The cost of a store write that runs it on every field is
//! memloop-store's `filtered_write` bench.
//!
//! `cargo bench -p memloop-secrets --bench secrets -- --warm-up-time 1 --measurement-time 5`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memloop_secrets::{SecretFilter, redact_secrets};
use memloop_testkit::harmless_text;
use std::hint::black_box;

fn bench_filter(c: &mut Criterion) {
    let text = harmless_text(1024);
    let mut group = c.benchmark_group("secret_filter");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("find_1KiB", |b| {
        b.iter(|| SecretFilter::find(black_box(&text)))
    });
    group.bench_function("redact_1KiB", |b| {
        b.iter(|| redact_secrets(black_box(&text)))
    });
    group.finish();
}

criterion_group!(benches, bench_filter);
criterion_main!(benches);
