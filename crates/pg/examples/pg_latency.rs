//! Write and select latency of the team store (PostgreSQL) next to the file store, at 2,000 and
//! 20,000 memories.
//!
//! ```sh
//! cargo run --release -p memloop-pg --example pg_latency -- "host=127.0.0.1 user=root dbname=test"
//! ```
//!
//! Memories are made of 3,000 distinct made-up words. Each size gets a fresh schema (dropped at
//! the end). Writes: 300 overwrites of existing
//! memories through `MemoryStore::write` (one transaction each: row lock, version check, index
//! view). Selects: 300 queries through `select_checked` (PostgreSQL full-text search vs the
//! in-process BM25, whose index is built before timing). Turns on the team store: the change
//! feed refresh plus the in-process BM25 select, with no change and with one row rewritten by
//! another instance before each turn. The file store's dir is populated with
//! plain file writes plus one `MEMORY.md` (populating it through the store rewrites the index on
//! every write, quadratic at 20,000).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use memloop_files::FileMemoryStore;
use memloop_pg::{PgConfig, PgFtsSelector, PgMemoryStore};
use memloop_recall::{Bm25Selector, SelectionContext, Selector};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, ScanCache, WriteMode};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ren", "tas", "vel", "dor", "pin", "qua", "sil", "tor", "ub", "zen", "gra",
    "fo", "hex", "jun", "nar", "ost", "pri", "ul", "wer", "yan", "bex",
];

/// `n` distinct made-up words (three syllables each, numbered in base 24).
fn vocabulary(n: usize) -> Vec<String> {
    let k = SYLLABLES.len();
    (0..n)
        .map(|i| {
            [i / (k * k) % k, i / k % k, i % k]
                .map(|d| SYLLABLES[d])
                .concat()
        })
        .collect()
}

fn sentence(vocab: &[String], words: usize, rng: &mut Rng) -> String {
    (0..words)
        .map(|_| vocab[rng.below(vocab.len())].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn memory(i: usize, vocab: &[String], rng: &mut Rng) -> (String, MemoryDoc) {
    let doc = MemoryDoc::new(
        format!("Note {i} {}", sentence(vocab, 2, rng)),
        sentence(vocab, 10, rng),
        MemoryType::Project,
        format!("{}\n", sentence(vocab, 60, rng)),
    );
    (format!("notes/n{i:05}.md"), doc)
}

/// The `p` quantile of `v`, in milliseconds.
fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    memloop_testkit::percentile(v, p).as_secs_f64() * 1e3
}

async fn time_writes(
    store: &dyn MemoryStore,
    n: usize,
    vocab: &[String],
    rng: &mut Rng,
) -> Vec<Duration> {
    let mut out = Vec::new();
    for _ in 0..300 {
        let (rel, doc) = memory(rng.below(n), vocab, rng);
        let t = Instant::now();
        if let Err(e) = store.write(&rel, &doc, WriteMode::Overwrite).await {
            eprintln!("write failed: {e}");
        }
        out.push(t.elapsed());
    }
    out
}

async fn time_selects(
    selector: Arc<dyn Selector>,
    store: &dyn MemoryStore,
    vocab: &[String],
    rng: &mut Rng,
) -> Vec<Duration> {
    let headers = store.scan().await.unwrap_or_default();
    let mut out = Vec::new();
    for _ in 0..300 {
        let q = format!("what about {}?", sentence(vocab, 4, rng));
        let t = Instant::now();
        let _ = selector
            .select_checked(&q, &headers, &SelectionContext::default())
            .await;
        out.push(t.elapsed());
    }
    out
}

/// What the recall hook does per turn on the team store with the in-process index: refresh the
/// headers through the change feed, then select with BM25 over them. With `writer`, another
/// instance rewrites one memory before each turn (untimed), so every turn applies one change.
async fn time_turns(
    cache: &ScanCache,
    selector: &dyn Selector,
    writer: Option<(&PgMemoryStore, usize)>,
    vocab: &[String],
    rng: &mut Rng,
) -> Vec<Duration> {
    let mut out = Vec::new();
    for _ in 0..300 {
        if let Some((w, n)) = writer {
            let (rel, doc) = memory(rng.below(n), vocab, rng);
            if let Err(e) = w.write(&rel, &doc, WriteMode::Overwrite).await {
                eprintln!("write failed: {e}");
            }
        }
        let q = format!("what about {}?", sentence(vocab, 4, rng));
        let t = Instant::now();
        match cache.headers().await {
            Ok(headers) => {
                let _ = selector
                    .select_checked(&q, &headers, &SelectionContext::default())
                    .await;
            }
            Err(e) => eprintln!("refresh failed: {e}"),
        }
        out.push(t.elapsed());
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "host=127.0.0.1 port=5432 user=root dbname=test".into());
    let sizes: Vec<usize> = match std::env::args().nth(2) {
        Some(s) => s.split(',').filter_map(|n| n.parse().ok()).collect(),
        None => vec![2_000, 20_000],
    };
    // The store's URL and TLS settings (`sslmode`, `sslrootcert`) for the admin connection too.
    let admin = PgConfig::new(&url, "bench").connect().await?;
    let version: String = admin.query_one("SHOW server_version", &[]).await?.get(0);
    println!("PostgreSQL {version}\n");
    println!("| store | memories | write p50 / p99 | select p50 / p99 |");
    println!("|---|---|---|---|");
    for n in sizes {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
        let vocab = vocabulary(3_000);
        let docs: Vec<(String, MemoryDoc)> = (0..n).map(|i| memory(i, &vocab, &mut rng)).collect();

        // PostgreSQL.
        let schema = format!("memloop_bench_{}", uuid::Uuid::new_v4().simple());
        let config = PgConfig::new(&url, "bench").schema(&schema).pool_size(8);
        let store = PgMemoryStore::open(config.clone()).await?;
        let started = Instant::now();
        let chunks: Vec<Vec<(String, MemoryDoc)>> =
            docs.chunks(n.div_ceil(8)).map(<[_]>::to_vec).collect();
        let mut tasks = Vec::new();
        for chunk in chunks {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for (rel, doc) in chunk {
                    if let Err(e) = store.write(&rel, &doc, WriteMode::Overwrite).await {
                        eprintln!("populate failed: {e}");
                    }
                }
            }));
        }
        for t in tasks {
            t.await?;
        }
        admin
            .batch_execute(&format!("ANALYZE {schema}.memloop_memories"))
            .await?;
        eprintln!(
            "postgres: {n} memories written in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let fresh = PgMemoryStore::open(config).await?;
        let mut w = time_writes(&fresh, n, &vocab, &mut rng).await;
        let mut s = time_selects(
            Arc::new(PgFtsSelector::new(fresh.clone())),
            &fresh,
            &vocab,
            &mut rng,
        )
        .await;
        println!(
            "| PostgreSQL (`PgMemoryStore`, FTS selector) | {n} | {:.2} / {:.2} ms | {:.2} / {:.2} ms |",
            pct(&mut w, 0.5),
            pct(&mut w, 0.99),
            pct(&mut s, 0.5),
            pct(&mut s, 0.99)
        );

        // The same database with the in-process BM25 kept current by the change feed.
        let team: Arc<dyn MemoryStore> = Arc::new(fresh.clone());
        let cache = ScanCache::new(team.clone());
        let bm25 = Bm25Selector::new(team.clone());
        let cold = Instant::now();
        bm25.sync(&cache.headers().await?).await;
        eprintln!(
            "postgres: in-process BM25 index of {n} memories built in {:.1} s",
            cold.elapsed().as_secs_f64()
        );
        let mut quiet = time_turns(&cache, &bm25, None, &vocab, &mut rng).await;
        let other = PgMemoryStore::open(PgConfig::new(&url, "bench").schema(&schema)).await?;
        let mut busy = time_turns(&cache, &bm25, Some((&other, n)), &vocab, &mut rng).await;
        println!(
            "| PostgreSQL, in-process BM25 over the change feed, per turn (no change / one changed row) | {n} | | {:.2} / {:.2} ms; {:.2} / {:.2} ms |",
            pct(&mut quiet, 0.5),
            pct(&mut quiet, 0.99),
            pct(&mut busy, 0.5),
            pct(&mut busy, 0.99)
        );
        admin
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await?;

        // File store.
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("memory");
        std::fs::create_dir_all(dir.join("notes"))?;
        let mut index = String::new();
        for (rel, doc) in &docs {
            std::fs::write(dir.join(rel), doc.render())?;
            index.push_str(&memloop_store::format_entry_line(
                &doc.name,
                rel,
                &doc.description,
                150,
            ));
            index.push('\n');
        }
        std::fs::write(dir.join("MEMORY.md"), index)?;
        let file: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(&dir)?);
        let mut w = time_writes(file.as_ref(), n, &vocab, &mut rng).await;
        let bm25 = Bm25Selector::new(file.clone());
        bm25.sync(&file.scan().await?).await;
        let mut s = time_selects(Arc::new(bm25), file.as_ref(), &vocab, &mut rng).await;
        println!(
            "| file dir (`FileMemoryStore`, BM25 selector) | {n} | {:.2} / {:.2} ms | {:.2} / {:.2} ms |",
            pct(&mut w, 0.5),
            pct(&mut w, 0.99),
            pct(&mut s, 0.5),
            pct(&mut s, 0.99)
        );
    }
    Ok(())
}
