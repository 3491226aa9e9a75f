#![allow(missing_docs)] // criterion_group! generates undocumented items
//! The secret filter's cost: `SecretFilter::find` and `redact_secrets` over 1 KiB of ordinary
//! memory text (prose in several languages that talks about passwords without giving one, so
//! every rule runs to the end). The cost of a store write that runs it on every field is
//! memloop-store's `filtered_write` bench.
//!
//! `cargo bench -p memloop-secrets --bench secrets -- --warm-up-time 1 --measurement-time 5`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memloop_secrets::{SecretFilter, redact_secrets};
use std::hint::black_box;

/// Harmless lines, cycled until the text is `len` bytes (cut at a char boundary).
fn harmless_text(len: usize) -> String {
    const LINES: &[&str] = &[
        "The user prefers small commits and runs the tests before pushing.",
        "Passwords are stored in 1Password; the token is read from GITHUB_TOKEN.",
        "password: see the team vault entry for staging",
        "Пароль хранится в хранилище секретов, его меняют раз в квартал.",
        "密码存放在团队保险库中，每季度轮换一次。",
        "La contraseña debe tener al menos 12 caracteres.",
        "API key: ${ANTHROPIC_API_KEY} (set by the CI job)",
        "Deploys go through the staging cluster first; ask Maria before a rollback.",
        "Der API-Schlüssel kommt aus der Umgebungsvariable.",
        "パスワードは12文字以上にしてください。",
    ];
    let mut out = String::with_capacity(len + 128);
    let mut i = 0;
    while out.len() < len {
        out.push_str(LINES[i % LINES.len()]);
        out.push('\n');
        i += 1;
    }
    let mut cut = len;
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    out.truncate(cut);
    out
}

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
