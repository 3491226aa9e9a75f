//! Cross-lingual recall benchmark on XQuAD: the 240 paragraphs in one language are the memories,
//! the questions in another the queries; a hit is the question's own paragraph among the first 5
//! selected memories (R@5; R@1 the first only).
//!
//! ```text
//! # BM25 only (no model):
//! cargo run --release --example crosslingual_recall -- ../shared/data/xquad
//! # plus, per model, the hybrid selector (BM25 fused with its embeddings) and its vectors alone:
//! cargo run --release --features candle --example crosslingual_recall -- ../shared/data/xquad \
//!     --embed candle:<all-MiniLM-L6-v2 dir> --embed candle:<multilingual-e5-small dir> \
//!     [--limit N] [--dense-weight W]... [--vector-cache DIR]
//! ```
//!
//! XQuAD (CC BY-SA 4.0; read from the given directory, `xquad.<lang>.json`, never copied) is the
//! same 240 English Wikipedia paragraphs and 1,190 questions professionally translated into each
//! language, parallel by question id. Pairs: English memories with the questions in each of
//! Arabic, German, Spanish, Hindi, Russian and Vietnamese, and the memories in each of those with
//! the English questions (12 pairs), plus English with English as a reference outside the means.
//! Every pair asks all 1,190 questions unless `--limit N` takes N of them, evenly spaced over the
//! file (every 1,190/N-th, so every article keeps its share).
//!
//! A memory's name is its paragraph's number (`p017`: the data set's titles are English in every
//! language, and would hand English questions a lexical clue), its description the paragraph's
//! first 60 characters, its body the paragraph. Ranking is memloop's own: `Bm25Selector` (the
//! lexical baseline) and, per `--embed` model, `HybridSelector` with its defaults (weighted
//! fusion, dense 0.3, passage vectors on) and, with the same vectors, the dense ranking alone
//! (`Fusion::Rrf` with the dense weight at 1 and no similarity floor, as `locomo_recall` ranks
//! vectors alone). `--dense-weight W` adds a hybrid column per model at that weight. An
//! embedding model's own query and passage prompts (multilingual-e5's `query: ` /
//! `passage: `) are applied by `CandleEmbedder` itself.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Context, Result, bail};
use memloop_files::FileMemoryStore;
use memloop_recall::{Bm25Selector, SelectionContext, Selector};
use memloop_store::{MemoryDoc, MemoryHeader, MemoryStore, MemoryType, WriteMode};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The languages paired with English.
const OTHERS: [&str; 6] = ["ar", "de", "es", "hi", "ru", "vi"];

/// One language's file: paragraphs in file order, questions with the paragraph they belong to.
struct Lang {
    paragraphs: Vec<String>,
    /// (question id, question text, paragraph number), in file order.
    questions: Vec<(String, String, usize)>,
}

fn load_lang(dir: &Path, lang: &str) -> Result<Lang> {
    let path = dir.join(format!("xquad.{lang}.json"));
    let raw =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let data: Value =
        serde_json::from_str(&raw).with_context(|| format!("parsing {}", path.display()))?;
    let mut paragraphs = Vec::new();
    let mut questions = Vec::new();
    for article in data["data"].as_array().context("no `data` array")? {
        for p in article["paragraphs"]
            .as_array()
            .context("no `paragraphs`")?
        {
            let context = p["context"]
                .as_str()
                .context("a paragraph without `context`")?;
            let n = paragraphs.len();
            paragraphs.push(context.trim().to_owned());
            for q in p["qas"].as_array().into_iter().flatten() {
                let (Some(id), Some(text)) = (q["id"].as_str(), q["question"].as_str()) else {
                    continue;
                };
                questions.push((id.to_owned(), text.trim().to_owned(), n));
            }
        }
    }
    if paragraphs.is_empty() || questions.is_empty() {
        bail!("{}: no paragraphs or no questions", path.display());
    }
    Ok(Lang {
        paragraphs,
        questions,
    })
}

fn rel(n: usize) -> String {
    format!("p{n:03}.md")
}

/// One language's paragraphs as a memory dir.
#[cfg_attr(not(feature = "candle"), allow(dead_code))]
struct Memories {
    _dir: tempfile::TempDir,
    store: Arc<dyn MemoryStore>,
    headers: Vec<MemoryHeader>,
    bm25: Bm25Selector,
}

async fn write_memories(lang: &Lang) -> Result<Memories> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(dir.path().join("memory"))?);
    for (n, body) in lang.paragraphs.iter().enumerate() {
        let description: String = body.chars().take(60).collect();
        let doc = MemoryDoc::new(
            format!("p{n:03}"),
            &description,
            MemoryType::Reference,
            body,
        );
        store.write(&rel(n), &doc, WriteMode::Overwrite).await?;
    }
    let headers = store.scan().await?;
    let bm25 = Bm25Selector::new(store.clone());
    bm25.sync(&headers).await;
    Ok(Memories {
        _dir: dir,
        store,
        headers,
        bm25,
    })
}

/// A memory language, a question language, and the questions asked: (text, wanted memory).
struct Pair {
    memories: &'static str,
    questions: &'static str,
    asked: Vec<(String, String)>,
}

fn pair(
    langs: &HashMap<&'static str, Lang>,
    memories: &'static str,
    questions: &'static str,
    limit: Option<usize>,
) -> Result<Pair> {
    let (Some(m), Some(q)) = (langs.get(memories), langs.get(questions)) else {
        bail!("{memories} or {questions} not loaded");
    };
    let own: HashMap<&str, usize> = m
        .questions
        .iter()
        .map(|(id, _, n)| (id.as_str(), *n))
        .collect();
    let all: Vec<(String, String)> = q
        .questions
        .iter()
        .filter_map(|(id, text, _)| own.get(id.as_str()).map(|n| (text.clone(), rel(*n))))
        .collect();
    let asked = match limit {
        Some(n) if n < all.len() => (0..n).map(|i| all[i * all.len() / n].clone()).collect(),
        _ => all,
    };
    Ok(Pair {
        memories,
        questions,
        asked,
    })
}

#[derive(Default, Clone, Copy)]
struct Tally {
    questions: usize,
    at1: usize,
    at5: usize,
}

impl Tally {
    fn r1(&self) -> f64 {
        100.0 * self.at1 as f64 / self.questions.max(1) as f64
    }
    fn r5(&self) -> f64 {
        100.0 * self.at5 as f64 / self.questions.max(1) as f64
    }
}

async fn tally(selector: &dyn Selector, headers: &[MemoryHeader], pair: &Pair) -> Result<Tally> {
    let ctx = SelectionContext::with_limit(5);
    let mut t = Tally::default();
    for (question, want) in &pair.asked {
        let chosen = selector.select_checked(question, headers, &ctx).await?;
        t.questions += 1;
        if chosen.first().is_some_and(|p| p == want) {
            t.at1 += 1;
        }
        if chosen.iter().take(5).any(|p| p == want) {
            t.at5 += 1;
        }
    }
    Ok(t)
}

/// Command-line options (the model ones unused without the `candle` feature).
#[cfg_attr(not(feature = "candle"), allow(dead_code))]
struct Options {
    xquad: PathBuf,
    embed: Vec<String>,
    limit: Option<usize>,
    dense_weights: Vec<f32>,
    vector_cache: Option<PathBuf>,
}

fn options() -> Result<Options> {
    const USAGE: &str = "usage: crosslingual_recall <xquad dir> [--embed candle:<model dir>]... \
                         [--limit N] [--dense-weight W]... [--vector-cache DIR]";
    let mut args = std::env::args().skip(1);
    let mut xquad = None;
    let mut embed = Vec::new();
    let mut limit = None;
    let mut dense_weights = Vec::new();
    let mut vector_cache = None;
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{a} needs a value; {USAGE}"))
        };
        match a.as_str() {
            "--embed" => embed.push(value()?),
            "--limit" => limit = Some(value()?.parse().context("--limit expects a number")?),
            "--dense-weight" => dense_weights.push(
                value()?
                    .parse()
                    .context("--dense-weight expects a number in [0, 1]")?,
            ),
            "--vector-cache" => vector_cache = Some(PathBuf::from(value()?)),
            _ if a.starts_with("--") => bail!("unknown option {a}; {USAGE}"),
            _ if xquad.is_none() => xquad = Some(PathBuf::from(&a)),
            _ => bail!("one xquad dir only; {USAGE}"),
        }
    }
    Ok(Options {
        xquad: xquad.context(USAGE)?,
        embed,
        limit,
        dense_weights,
        vector_cache,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = options()?;
    let mut langs: HashMap<&'static str, Lang> = HashMap::new();
    for lang in std::iter::once("en").chain(OTHERS) {
        langs.insert(lang, load_lang(&opts.xquad, lang)?);
    }
    // The reference pair first (outside the means), then English memories, then English
    // questions.
    let mut pairs = vec![pair(&langs, "en", "en", opts.limit)?];
    for other in OTHERS {
        pairs.push(pair(&langs, "en", other, opts.limit)?);
    }
    for other in OTHERS {
        pairs.push(pair(&langs, other, "en", opts.limit)?);
    }
    let mut memories: BTreeMap<&'static str, Memories> = BTreeMap::new();
    for lang in std::iter::once("en").chain(OTHERS) {
        memories.insert(lang, write_memories(&langs[lang]).await?);
    }

    // results[column][pair]
    let mut columns: Vec<String> = vec!["BM25".to_owned()];
    let mut results: Vec<Vec<Tally>> = Vec::new();
    let mut bm25 = Vec::new();
    for p in &pairs {
        let m = &memories[p.memories];
        bm25.push(tally(&m.bm25, &m.headers, p).await?);
    }
    results.push(bm25);
    for spec in &opts.embed {
        for (name, tallies) in model_columns(spec, &opts, &pairs, &memories).await? {
            columns.push(name);
            results.push(tallies);
        }
    }
    print_tables(&columns, &results, &pairs);
    Ok(())
}

/// The hybrid and dense-alone columns of one `--embed` model.
#[cfg(feature = "candle")]
async fn model_columns(
    spec: &str,
    opts: &Options,
    pairs: &[Pair],
    memories: &BTreeMap<&'static str, Memories>,
) -> Result<Vec<(String, Vec<Tally>)>> {
    use memloop_core::embed::Embedder;
    use memloop_recall::{Fusion, HybridConfig, HybridSelector};
    use std::time::{Duration, Instant};

    let Some(dir) = spec.strip_prefix("candle:") else {
        bail!("--embed expects candle:<model dir>, got {spec}");
    };
    let loaded = memloop::candle::CandleEmbedder::load(dir)
        .with_context(|| format!("cannot load the model at {dir}"))?;
    let short = Path::new(dir)
        .file_name()
        .map_or_else(|| dir.to_owned(), |n| n.to_string_lossy().into_owned());
    let embedder: Arc<dyn Embedder> = Arc::new(memo::Memo::new(Arc::new(loaded)));
    let tmp = tempfile::tempdir()?;
    let cache_dir = opts.vector_cache.as_deref().unwrap_or(tmp.path());
    std::fs::create_dir_all(cache_dir)?;

    // A loaded machine measures ranking, not time-outs.
    let base = HybridConfig {
        embed_budget: Duration::from_secs(3600),
        ..HybridConfig::default()
    };
    let mut configs: Vec<(String, HybridConfig)> =
        vec![(format!("hybrid {short} (defaults)"), base.clone())];
    for w in &opts.dense_weights {
        configs.push((
            format!("hybrid {short}, dense {w}"),
            HybridConfig {
                fusion: Fusion::Weighted { dense_weight: *w },
                ..base.clone()
            },
        ));
    }
    configs.push((
        format!("{short} alone"),
        HybridConfig {
            fusion: Fusion::Rrf {
                k: 60.0,
                dense_weight: 1.0,
            },
            min_similarity: -1.0,
            ..base.clone()
        },
    ));

    // Embed every memory dir once (or read the vectors from --vector-cache).
    let mut embedded = 0;
    let started = Instant::now();
    for (lang, m) in memories {
        let cache = cache_dir.join(format!("{short}-{lang}.bin"));
        let hybrid =
            HybridSelector::with_config(m.store.clone(), embedder.clone(), cache, base.clone());
        let t = Instant::now();
        let report = hybrid.warm(&m.headers).await?;
        embedded += report.embedded;
        eprintln!(
            "{short}: {lang} memories: {} embedded in {:.1} s",
            report.embedded,
            t.elapsed().as_secs_f64()
        );
    }
    println!(
        "<!-- {short}: embedded {embedded} memories (whole text and passages) of {} languages in {:.1} s -->",
        memories.len(),
        started.elapsed().as_secs_f64()
    );

    let mut out = Vec::new();
    let started = Instant::now();
    for (name, config) in configs {
        let mut selectors = HashMap::new();
        for (lang, m) in memories {
            let cache = cache_dir.join(format!("{short}-{lang}.bin"));
            let s = HybridSelector::with_config(
                m.store.clone(),
                embedder.clone(),
                cache,
                config.clone(),
            );
            s.warm(&m.headers).await?;
            selectors.insert(*lang, s);
        }
        let mut tallies = Vec::new();
        for p in pairs {
            let m = &memories[p.memories];
            let s = selectors
                .get(p.memories)
                .context("a memory language without a selector")?;
            let t = tally(s, &m.headers, p).await?;
            eprintln!(
                "{name}: {} memories, {} questions: R@1 {:.1}, R@5 {:.1}",
                p.memories,
                p.questions,
                t.r1(),
                t.r5()
            );
            tallies.push(t);
        }
        out.push((name, tallies));
    }
    println!(
        "<!-- {short}: every column's questions ranked in {:.1} s (each distinct question embedded once) -->",
        started.elapsed().as_secs_f64()
    );
    Ok(out)
}

#[cfg(not(feature = "candle"))]
async fn model_columns(
    spec: &str,
    _: &Options,
    _: &[Pair],
    _: &BTreeMap<&'static str, Memories>,
) -> Result<Vec<(String, Vec<Tally>)>> {
    bail!("--embed {spec} needs `--features candle`")
}

fn print_tables(columns: &[String], results: &[Vec<Tally>], pairs: &[Pair]) {
    for (i, p) in pairs.iter().enumerate() {
        let asked = results
            .first()
            .and_then(|r| r.get(i))
            .map_or(0, |t| t.questions);
        println!(
            "\n### {} memories, {} questions ({asked} questions, 240 memories)\n",
            p.memories, p.questions
        );
        println!("| selector | R@1 | R@5 |");
        println!("|---|---:|---:|");
        for (c, name) in columns.iter().enumerate() {
            let t = results[c][i];
            println!("| {name} | {:.1} | **{:.1}** |", t.r1(), t.r5());
        }
    }
    // Pair indices: 0 the reference, 1..=6 English memories, 7..=12 English questions.
    let groups: [(&str, std::ops::Range<usize>); 3] = [
        ("mean, English memories (6 pairs)", 1..7),
        ("mean, English questions (6 pairs)", 7..13),
        ("**mean, all 12 pairs**", 1..13),
    ];
    for (measure, pick) in [
        ("R@5", Tally::r5 as fn(&Tally) -> f64),
        ("R@1", Tally::r1 as fn(&Tally) -> f64),
    ] {
        println!("\n### {measure} per pair (memories → questions)\n");
        println!("| pair | {} |", columns.join(" | "));
        println!("|---|{}", "---:|".repeat(columns.len()));
        for (i, p) in pairs.iter().enumerate().skip(1) {
            let cells: Vec<String> = results
                .iter()
                .map(|r| format!("{:.1}", pick(&r[i])))
                .collect();
            println!(
                "| {} → {} | {} |",
                p.memories,
                p.questions,
                cells.join(" | ")
            );
        }
        for (label, range) in &groups {
            let cells: Vec<String> = results
                .iter()
                .map(|r| {
                    let vals: Vec<f64> = r[range.clone()].iter().map(pick).collect();
                    format!("{:.1}", vals.iter().sum::<f64>() / vals.len().max(1) as f64)
                })
                .collect();
            println!("| {label} | {} |", cells.join(" | "));
        }
        if let Some(p) = pairs.first() {
            let cells: Vec<String> = results
                .iter()
                .map(|r| format!("{:.1}", pick(&r[0])))
                .collect();
            println!(
                "| reference, same language: {} → {} | {} |",
                p.memories,
                p.questions,
                cells.join(" | ")
            );
        }
    }
}

/// Remembers every vector computed, by role and text: each question is asked of several
/// selectors, and the English questions of seven pairs.
#[cfg(feature = "candle")]
mod memo {
    use memloop_core::embed::{EmbedError, Embedder};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    pub struct Memo {
        inner: Arc<dyn Embedder>,
        seen: Mutex<HashMap<(bool, String), Vec<f32>>>,
    }

    impl Memo {
        pub fn new(inner: Arc<dyn Embedder>) -> Self {
            Self {
                inner,
                seen: Mutex::new(HashMap::new()),
            }
        }

        async fn recall(
            &self,
            texts: &[String],
            queries: bool,
        ) -> Result<Vec<Vec<f32>>, EmbedError> {
            let missing: Vec<String> = {
                let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                texts
                    .iter()
                    .filter(|t| !seen.contains_key(&(queries, (*t).clone())))
                    .cloned()
                    .collect()
            };
            if !missing.is_empty() {
                let vectors = if queries {
                    self.inner.embed_queries_checked(&missing).await?
                } else {
                    self.inner.embed_checked(&missing).await?
                };
                let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                seen.extend(missing.into_iter().map(|t| (queries, t)).zip(vectors));
            }
            let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            texts
                .iter()
                .map(|t| {
                    seen.get(&(queries, t.clone())).cloned().ok_or_else(|| {
                        EmbedError::Inference("a vector went missing from the memo".into())
                    })
                })
                .collect()
        }
    }

    #[async_trait::async_trait]
    impl Embedder for Memo {
        fn model_id(&self) -> &str {
            self.inner.model_id()
        }
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        fn max_batch(&self) -> usize {
            self.inner.max_batch()
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.recall(texts, false).await
        }
        async fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.recall(texts, true).await
        }
    }
}
