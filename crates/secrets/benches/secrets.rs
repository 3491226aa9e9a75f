#![allow(missing_docs)] // criterion_group! generates undocumented items
//! The secret filter's cost: `SecretFilter::find` and `redact_secrets` over 1 KiB of ordinary
//! memory text (prose in several languages that talks about passwords without giving one, so
//! every rule runs to the end); `find` over the same text wrapped at 40 columns (line breaks
//! between words, some of them long enough to be read joined) and with the zero-width
//! non-joiners and joiners of Persian words and emoji in it (the text is read without them).
//! The cost of a store write that runs it on every field is memloop-store's `filtered_write`
//! bench. And `redact_secrets` over a 200-line `MEMORY.md` index whose descriptions are cut
//! with `…`, as a `context_load` answer holds it.
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
    let wrapped = wrap(&text, 40);
    // A refusal would stop the filter early and flatter the bench.
    assert_eq!(SecretFilter::find(&wrapped), None);
    group.bench_function("find_1KiB_wrapped", |b| {
        b.iter(|| SecretFilter::find(black_box(&wrapped)))
    });
    let joiners = text.replace("Deploys", "می\u{200C}خواهم 👩\u{200D}💻 Deploys");
    assert_eq!(SecretFilter::find(&joiners), None);
    group.bench_function("find_1KiB_zero_width", |b| {
        b.iter(|| SecretFilter::find(black_box(&joiners)))
    });
    // A `MEMORY.md` index as `context_load` answers it: one line per memory, each description
    // cut with `…` (not in NFKC form, so every line is read in its NFKC form).
    let index: String = (0..200)
        .map(|i| {
            format!(
                "- [Deploy note {i}](knowledge/deploy-{i:04}.md) — Deploy pipeline note {i}: \
                 releases go out on Tuesdays after the billing export dra…\n"
            )
        })
        .collect();
    assert_eq!(redact_secrets(&index).1, 0);
    group.throughput(Throughput::Bytes(index.len() as u64));
    group.bench_function("redact_index_200_lines", |b| {
        b.iter(|| redact_secrets(black_box(&index)))
    });
    group.finish();
}

/// `text` with each line broken between words before `width` characters.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / width);
    for line in text.lines() {
        let mut col = 0;
        for (i, word) in line.split(' ').enumerate() {
            let n = word.chars().count();
            if i > 0 {
                if col + 1 + n > width {
                    out.push('\n');
                    col = 0;
                } else {
                    out.push(' ');
                    col += 1;
                }
            }
            out.push_str(word);
            col += n;
        }
        out.push('\n');
    }
    out
}

criterion_group!(benches, bench_filter);
criterion_main!(benches);
