//! CMRC 2018 recall benchmark (Chinese): every paragraph of the dev set is a memory, every
//! question a query; Recall@k is the share of questions whose own paragraph is among the k
//! selected memories.
//!
//! ```text
//! cargo run --release --example cmrc_recall -- ../shared/data/cmrc2018/cmrc2018_dev.json
//! # plus a row for PostgreSQL search (memloop-pg's PgFtsSelector):
//! cargo run --release --example cmrc_recall -- ../shared/data/cmrc2018/cmrc2018_dev.json \
//!     --pg "host=127.0.0.1 user=root dbname=test"
//! # plus rows for the hybrid selector (BM25 + a sentence-transformers model: all-MiniLM-L6-v2,
//! # an English model, or multilingual-e5-small, whose query / passage prompts the model dir
//! # declares and `CandleEmbedder` applies) and for the model's vectors alone:
//! cargo run --release --features candle --example cmrc_recall -- \
//!     ../shared/data/cmrc2018/cmrc2018_dev.json --embed candle:<model dir> [--dense-weight W]...
//! ```
//!
//! A memory's name is its paragraph id, its description the paragraph's first sentence (at most
//! 60 characters), its body the whole paragraph. Rows: the keyword selector (name and
//! description only), the default `Bm25Selector`, and as an anchor a plain character-bigram BM25
//! (k1 1.2, b 0.75) over the paragraph text. The data set (CC BY-SA 4.0) is read from the given
//! path and never copied.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Context, Result};
use memloop_files::FileMemoryStore;
use memloop_recall::{Bm25Params, Bm25Selector, KeywordSelector, SelectionContext, Selector};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Paragraph {
    rel: String,
    name: String,
    description: String,
    body: String,
}

struct Question {
    text: String,
    rel: String,
}

fn load(path: &str) -> Result<(Vec<Paragraph>, Vec<Question>)> {
    let raw = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let data: Value = serde_json::from_str(&raw)?;
    let mut paragraphs = Vec::new();
    let mut questions = Vec::new();
    for item in data.as_array().context("a JSON array")? {
        let id = item["context_id"].as_str().context("context_id")?;
        let text = item["context_text"].as_str().context("context_text")?;
        let rel = format!("{}.md", id.to_lowercase().replace('_', "-"));
        let first = text.split_inclusive('。').next().unwrap_or(text);
        let description: String = first.chars().take(60).collect();
        paragraphs.push(Paragraph {
            rel: rel.clone(),
            name: id.to_owned(),
            description,
            body: text.to_owned(),
        });
        for q in item["qas"].as_array().into_iter().flatten() {
            if let Some(t) = q["query_text"].as_str() {
                questions.push(Question {
                    text: t.to_owned(),
                    rel: rel.clone(),
                });
            }
        }
    }
    Ok((paragraphs, questions))
}

#[derive(Default)]
struct Tally {
    questions: usize,
    at1: usize,
    at5: usize,
    latencies: Vec<Duration>,
}

impl Tally {
    fn add(&mut self, want: &str, chosen: &[String], took: Duration) {
        self.questions += 1;
        self.latencies.push(took);
        if chosen.first().is_some_and(|p| p == want) {
            self.at1 += 1;
        }
        if chosen.iter().take(5).any(|p| p == want) {
            self.at5 += 1;
        }
    }

    fn row(&mut self, name: &str, memories: usize) {
        self.latencies.sort();
        let pct = |p: f64| {
            let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
            self.latencies.get(i).copied().unwrap_or_default()
        };
        let share = |n: usize| 100.0 * n as f64 / self.questions.max(1) as f64;
        println!(
            "| {name} | {memories} | {} | {:.1} | **{:.1}** | {:.0} µs | {:.0} µs |",
            self.questions,
            share(self.at1),
            share(self.at5),
            pct(0.5).as_secs_f64() * 1e6,
            pct(0.99).as_secs_f64() * 1e6,
        );
    }
}

/// The anchor: BM25 over the overlapping character bigrams of the raw text (alphanumeric
/// characters only, lowercased), no stop words, no stemming.
struct CharBigramBm25 {
    postings: HashMap<String, Vec<(usize, f32)>>,
    lens: Vec<f32>,
    avg: f32,
}

fn char_bigrams(text: &str) -> Vec<String> {
    let chars: Vec<char> = text
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    chars.windows(2).map(|w| w.iter().collect()).collect()
}

impl CharBigramBm25 {
    fn new(docs: &[&str]) -> Self {
        let mut postings: HashMap<String, Vec<(usize, f32)>> = HashMap::new();
        let mut lens = Vec::new();
        for (d, text) in docs.iter().enumerate() {
            let grams = char_bigrams(text);
            lens.push(grams.len() as f32);
            let mut tf: HashMap<String, f32> = HashMap::new();
            for g in grams {
                *tf.entry(g).or_default() += 1.0;
            }
            for (g, n) in tf {
                postings.entry(g).or_default().push((d, n));
            }
        }
        let avg = lens.iter().sum::<f32>() / lens.len().max(1) as f32;
        Self {
            postings,
            lens,
            avg,
        }
    }

    fn search(&self, query: &str, k: usize) -> Vec<usize> {
        let (k1, b) = (1.2f32, 0.75f32);
        let n = self.lens.len() as f32;
        let mut scores = vec![0f32; self.lens.len()];
        let mut grams = char_bigrams(query);
        grams.sort();
        grams.dedup();
        for g in grams {
            let Some(list) = self.postings.get(&g) else {
                continue;
            };
            let df = list.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (d, tf) in list {
                let norm = k1 * (1.0 - b + b * self.lens[*d] / self.avg);
                scores[*d] += idf * tf * (k1 + 1.0) / (tf + norm);
            }
        }
        let mut ranked: Vec<(usize, f32)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        ranked.into_iter().take(k).map(|(d, _)| d).collect()
    }
}

async fn run_selector(
    name: &str,
    selector: &dyn Selector,
    store: &Arc<dyn MemoryStore>,
    questions: &[Question],
) -> Result<()> {
    let headers = store.scan().await?;
    let ctx = SelectionContext::with_limit(5);
    let mut tally = Tally::default();
    for q in questions {
        let t = Instant::now();
        let chosen = selector.select_checked(&q.text, &headers, &ctx).await?;
        tally.add(&q.rel, &chosen, t.elapsed());
    }
    tally.row(name, headers.len());
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .context("usage: cmrc_recall <cmrc2018_dev.json> [--pg URL]")?;
    let pg = args
        .iter()
        .position(|a| a == "--pg")
        .and_then(|i| args.get(i + 1));
    let (paragraphs, questions) = load(path)?;

    let tmp = tempfile::tempdir()?;
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path().join("memory"))?);
    for p in &paragraphs {
        let doc = MemoryDoc::new(&p.name, &p.description, MemoryType::Reference, &p.body);
        store.write(&p.rel, &doc, WriteMode::Overwrite).await?;
    }
    println!("| selector | memories | questions | R@1 | R@5 | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|---:|---:|");

    let keyword = KeywordSelector::default();
    run_selector("keyword (name + description)", &keyword, &store, &questions).await?;

    let bm25 = Bm25Selector::new(store.clone());
    bm25.sync(&store.scan().await?).await;
    run_selector("bm25 (default)", &bm25, &store, &questions).await?;

    // Pseudo-relevance feedback with the parameters chosen on LoCoMo conversations 1–5
    // (`locomo_recall --tune`): does it cost anything in Chinese?
    let feedback = Bm25Params {
        feedback_docs: 3,
        feedback_terms: 20,
        feedback_weight: 0.1,
        ..Bm25Params::default()
    };
    let bm25_fb = Bm25Selector::with_params(store.clone(), feedback);
    bm25_fb.sync(&store.scan().await?).await;
    run_selector(
        "bm25 + feedback (3 memories, 20 words, 0.1)",
        &bm25_fb,
        &store,
        &questions,
    )
    .await?;

    let bodies: Vec<&str> = paragraphs.iter().map(|p| p.body.as_str()).collect();
    let anchor = CharBigramBm25::new(&bodies);
    let mut tally = Tally::default();
    for q in &questions {
        let t = Instant::now();
        let chosen: Vec<String> = anchor
            .search(&q.text, 5)
            .into_iter()
            .map(|d| paragraphs[d].rel.clone())
            .collect();
        tally.add(&q.rel, &chosen, t.elapsed());
    }
    tally.row("anchor: plain character-bigram BM25", paragraphs.len());

    if let Some(url) = pg {
        postgres_row(url, &paragraphs, &questions).await?;
    }
    if let Some(spec) = args
        .iter()
        .position(|a| a == "--embed")
        .and_then(|i| args.get(i + 1))
    {
        // `--dense-weight W` (repeatable): one more hybrid row each, passages on.
        let mut weights = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if a == "--dense-weight" {
                let w: f32 = args
                    .get(i + 1)
                    .context("--dense-weight needs a number")?
                    .parse()
                    .context("--dense-weight expects a number in [0, 1]")?;
                weights.push(w);
            }
        }
        hybrid_row(spec, &store, &questions, &weights).await?;
    }
    Ok(())
}

/// The `HybridSelector` rows (BM25 + dense): the defaults, and beside them the fusion's dense
/// weight and the passage vectors changed one at a time, the memories embedded beforehand; the
/// embedding budget is raised so a loaded machine measures ranking, not time-outs.
async fn hybrid_row(
    spec: &str,
    store: &Arc<dyn MemoryStore>,
    questions: &[Question],
    weights: &[f32],
) -> Result<()> {
    let Some(dir) = spec.strip_prefix("candle:") else {
        anyhow::bail!("--embed expects candle:<model dir>, got {spec}");
    };
    #[cfg(feature = "candle")]
    {
        use memloop_core::embed::Embedder;
        use memloop_recall::{Fusion, HybridConfig, HybridSelector};
        let embedder = Arc::new(
            memloop::candle::CandleEmbedder::load(dir)
                .with_context(|| format!("cannot load the model at {dir}"))?,
        );
        let model = embedder.model_id().to_owned();
        // The model's directory name for the row labels (all-MiniLM-L6-v2, multilingual-e5-small).
        let short = std::path::Path::new(dir)
            .file_name()
            .map_or_else(|| dir.to_owned(), |n| n.to_string_lossy().into_owned());
        let tmp = tempfile::tempdir()?;
        let weighted = |dense_weight| Fusion::Weighted { dense_weight };
        let floor = HybridConfig::default().min_similarity;
        let mut rows = vec![
            (
                format!("hybrid (BM25 + {short}, defaults: dense 0.3, passages)"),
                Fusion::default(),
                true,
                floor,
            ),
            (
                "hybrid, dense 0.4, passages".to_owned(),
                weighted(0.4),
                true,
                floor,
            ),
            (
                "hybrid, dense 0.4, one vector per memory".to_owned(),
                weighted(0.4),
                false,
                floor,
            ),
            (
                "hybrid, dense 0.3, one vector per memory (the defaults before passages)"
                    .to_owned(),
                weighted(0.3),
                false,
                floor,
            ),
            // The vectors alone (passages), every memory ranked: as locomo_recall ranks them.
            (
                format!("{short} alone (passages)"),
                Fusion::Rrf {
                    k: 60.0,
                    dense_weight: 1.0,
                },
                true,
                -1.0,
            ),
        ];
        for w in weights.iter().rev() {
            rows.insert(
                1,
                (
                    format!("hybrid, dense {w}, passages"),
                    weighted(*w),
                    true,
                    floor,
                ),
            );
        }
        for (name, fusion, passages, min_similarity) in rows {
            let config = HybridConfig {
                embed_budget: Duration::from_secs(600),
                fusion,
                passages,
                min_similarity,
                ..HybridConfig::default()
            };
            let cache = tmp.path().join(format!("vectors-{passages}.bin"));
            let hybrid =
                HybridSelector::with_config(store.clone(), embedder.clone(), cache, config);
            let t = Instant::now();
            let report = hybrid.warm(&store.scan().await?).await?;
            if report.embedded > 0 {
                println!(
                    "<!-- embedded {} memories with {model} (passages {passages}) in {:.1} s -->",
                    report.embedded,
                    t.elapsed().as_secs_f64()
                );
            }
            run_selector(&name, &hybrid, store, questions).await?;
        }
        Ok(())
    }
    #[cfg(not(feature = "candle"))]
    {
        let _ = (store, questions, weights);
        anyhow::bail!("`candle:{dir}` needs `--features candle`")
    }
}

async fn postgres_row(url: &str, paragraphs: &[Paragraph], questions: &[Question]) -> Result<()> {
    use memloop_pg::{PgConfig, PgFtsSelector, PgMemoryStore};
    let schema = format!("memloop_cmrc_{}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let result = async {
        let config = PgConfig::new(url, "cmrc").schema(&schema);
        let pg = PgMemoryStore::open(config).await?;
        for p in paragraphs {
            let doc = MemoryDoc::new(&p.name, &p.description, MemoryType::Reference, &p.body);
            pg.write(&p.rel, &doc, WriteMode::Overwrite).await?;
        }
        let store: Arc<dyn MemoryStore> = Arc::new(pg.clone());
        run_selector(
            "postgres search (PgFtsSelector)",
            &PgFtsSelector::new(pg),
            &store,
            questions,
        )
        .await
    }
    .await;
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await?;
    result
}
