//! The semantic rows of the LoCoMo tool (`--embed SPEC`): BM25, dense alone and hybrid, side by
//! side on three retrieval units (plain observations, session summaries, dialog turns),
//! with the fusion and the lifted rows' settings (dense weight, BM25 lift, dense lift) chosen
//! on conversations 1–5 and reported on 6–10; then latency, index build time and cache size at
//! 2,000 memories.

use crate::{
    Conversation, Dir, Level, Tally, evaluate, evaluate_with, is_observation, level_headers,
    write_dir,
};
use anyhow::{Context, Result, bail};
use memloop_core::embed::{EmbedError, Embedder};
use memloop_files::FileMemoryStore;
use memloop_recall::{
    Bm25Params, Fusion, HybridConfig, HybridSelector, SelectionContext, Selector,
};
use memloop_store::{MemoryHeader, MemoryStore};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Conversations the fusion is tuned on (1–5); the rest (6–10) are reported untouched.
const TUNE: usize = 5;

/// Build the embedder a `--embed` spec names: `candle:<model dir>` (feature `candle`) or
/// `openai:<base url>#<model>` (feature `providers`).
pub async fn embedder(spec: &str) -> Result<Arc<dyn Embedder>> {
    if let Some(dir) = spec.strip_prefix("candle:") {
        #[cfg(feature = "candle")]
        {
            let e = memloop::candle::CandleEmbedder::load(dir)
                .with_context(|| format!("cannot load the model at {dir}"))?;
            return Ok(Arc::new(e));
        }
        #[cfg(not(feature = "candle"))]
        bail!("`candle:{dir}` needs `--features candle`");
    }
    if let Some(rest) = spec.strip_prefix("openai:") {
        #[cfg(feature = "providers")]
        {
            use memloop_providers::{OpenAiEmbedConfig, OpenAiEmbedder};
            let (url, model) = openai_endpoint(rest)?;
            let mut config = OpenAiEmbedConfig::new(url, model);
            config.api_key = std::env::var("OPENAI_API_KEY").ok();
            return Ok(Arc::new(OpenAiEmbedder::connect(config).await?));
        }
        #[cfg(not(feature = "providers"))]
        bail!("`openai:{rest}` needs `--features providers`");
    }
    bail!("--embed expects candle:<model dir> or openai:<base url>#<model>, got {spec}")
}

/// The `<base url>` and `<model>` of an `openai:<base url>#<model>` spec (`--embed`, `--rerank`).
#[cfg_attr(not(feature = "providers"), allow(dead_code))]
pub fn openai_endpoint(rest: &str) -> Result<(&str, &str)> {
    rest.split_once('#').context("openai:<base url>#<model>")
}

/// Remembers every vector it computed, by text and by role (query or searched text): the sweep
/// asks the same questions many times.
struct Memo {
    inner: Arc<dyn Embedder>,
    seen: Mutex<HashMap<(bool, String), Vec<f32>>>,
}

impl Memo {
    async fn recall(&self, texts: &[String], queries: bool) -> Result<Vec<Vec<f32>>, EmbedError> {
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
        Ok(texts
            .iter()
            .map(|t| seen.get(&(queries, t.clone())).cloned().unwrap_or_default())
            .collect())
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

/// One retrieval unit: which memory dir of a conversation, and which level of it.
#[derive(Clone, Copy)]
struct Unit {
    name: &'static str,
    dir: usize,
    level: Level,
    lifted: Level,
}

const UNITS: [Unit; 3] = [
    Unit {
        name: "observation",
        dir: 0,
        level: Level::Observation,
        lifted: Level::ObservationLifted,
    },
    Unit {
        name: "session summary",
        dir: 0,
        level: Level::Summary,
        lifted: Level::SummaryLifted,
    },
    Unit {
        name: "dialog turn",
        dir: 1,
        level: Level::Observation,
        lifted: Level::ObservationLifted,
    },
];

/// The BM25 parameters of every row (`--bm25`, else the defaults); set once by [`run`].
static PARAMS: std::sync::OnceLock<Bm25Params> = std::sync::OnceLock::new();

/// Whether long memories get a vector per passage (off with `--no-passages`); set once by
/// [`run`].
static PASSAGES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// The hybrid defaults with this run's passage setting.
fn base() -> HybridConfig {
    HybridConfig {
        passages: PASSAGES.get().copied().unwrap_or(true),
        ..HybridConfig::default()
    }
}

fn flat() -> Bm25Params {
    Bm25Params {
        dir_weight: 0.0,
        ..PARAMS.get().copied().unwrap_or_default()
    }
}

fn lifted() -> Bm25Params {
    let p = PARAMS.get().copied().unwrap_or_default();
    Bm25Params {
        dir_weight: if p.dir_weight > 0.0 {
            p.dir_weight
        } else {
            0.5
        },
        ..p
    }
}

/// Recall of one selector kind over a range of conversations.
struct Runner<'a> {
    convs: &'a [Conversation],
    dirs: &'a [[Dir; 2]],
    embedder: Arc<dyn Embedder>,
    cache_dir: PathBuf,
}

impl Runner<'_> {
    async fn hybrid(
        &self,
        conv: usize,
        unit: Unit,
        level: Level,
        config: HybridConfig,
    ) -> Result<HybridSelector> {
        let dir = &self.dirs[conv][unit.dir];
        let lifted = matches!(level, Level::ObservationLifted | Level::SummaryLifted);
        let cache = self.cache_dir.join(format!(
            "conv{conv:02}-{}-{}.bin",
            unit.name.replace(' ', "-"),
            if lifted { "all" } else { "level" }
        ));
        let selector =
            HybridSelector::with_config(dir.store.clone(), self.embedder.clone(), cache, config);
        selector.warm(&level_headers(level, dir)).await?;
        Ok(selector)
    }

    /// Hybrid with `config` on `unit` at `level`, over conversations `range`.
    async fn tally_hybrid(
        &self,
        range: std::ops::Range<usize>,
        unit: Unit,
        level: Level,
        config: &HybridConfig,
    ) -> Result<Tally> {
        let mut tally = Tally::default();
        for i in range {
            let selector = self.hybrid(i, unit, level, config.clone()).await?;
            evaluate_with(
                &selector,
                level,
                &self.dirs[i][unit.dir],
                &self.convs[i],
                &mut tally,
            )
            .await?;
        }
        Ok(tally)
    }

    /// R@5 of `config` on each unit (at its lifted level or not) over `range`, and their mean.
    async fn unit_recalls(
        &self,
        range: std::ops::Range<usize>,
        lifted: bool,
        config: &HybridConfig,
    ) -> Result<(Vec<f64>, f64)> {
        let mut r5s = Vec::new();
        for unit in UNITS {
            let level = if lifted { unit.lifted } else { unit.level };
            let t = self
                .tally_hybrid(range.clone(), unit, level, config)
                .await?;
            r5s.push(t.recall(None).0);
        }
        let mean = r5s.iter().sum::<f64>() / r5s.len() as f64;
        Ok((r5s, mean))
    }

    /// [`tally_hybrid`](Self::tally_hybrid) over the tuning half and the held-out half.
    async fn hybrid_halves(
        &self,
        [tune, report]: &[std::ops::Range<usize>; 2],
        unit: Unit,
        level: Level,
        config: &HybridConfig,
    ) -> Result<(Tally, Tally)> {
        Ok((
            self.tally_hybrid(tune.clone(), unit, level, config).await?,
            self.tally_hybrid(report.clone(), unit, level, config)
                .await?,
        ))
    }

    /// [`tally_bm25`](Self::tally_bm25) over the tuning half and the held-out half.
    async fn bm25_halves(
        &self,
        [tune, report]: &[std::ops::Range<usize>; 2],
        unit: Unit,
        level: Level,
        params: Bm25Params,
    ) -> Result<(Tally, Tally)> {
        Ok((
            self.tally_bm25(tune.clone(), unit, level, params).await?,
            self.tally_bm25(report.clone(), unit, level, params).await?,
        ))
    }

    async fn tally_bm25(
        &self,
        range: std::ops::Range<usize>,
        unit: Unit,
        level: Level,
        params: Bm25Params,
    ) -> Result<Tally> {
        let mut tally = Tally::default();
        for i in range {
            evaluate(
                "bm25",
                params,
                level,
                &self.dirs[i][unit.dir],
                &self.convs[i],
                &mut tally,
            )
            .await?;
        }
        Ok(tally)
    }
}

fn candidates() -> Vec<(String, Fusion)> {
    let mut out = Vec::new();
    for k in [5.0, 20.0, 60.0] {
        for w in [0.4, 0.5, 0.6, 0.7] {
            out.push((
                format!("rrf k={k} w={w}"),
                Fusion::Rrf { k, dense_weight: w },
            ));
        }
    }
    for w in [0.3, 0.4, 0.5, 0.6, 0.7] {
        out.push((
            format!("weighted w={w}"),
            Fusion::Weighted { dense_weight: w },
        ));
    }
    out
}

fn dense_only() -> HybridConfig {
    HybridConfig {
        fusion: Fusion::Rrf {
            k: 60.0,
            dense_weight: 1.0,
        },
        bm25: flat(),
        // Pure dense retrieval: every memory ranked, however dissimilar.
        min_similarity: -1.0,
        ..base()
    }
}

/// The settings of the lifted rows with the best mean R@5 over the three units on `tune`.
async fn choose_lifted(runner: &Runner<'_>, tune: std::ops::Range<usize>) -> Result<HybridConfig> {
    println!(
        "\nLifted rows on conversations 1–{} (R@5 per unit; the best mean is used below):\n",
        tune.end
    );
    println!(
        "| dense weight | BM25 lift | dense lift | observation | session summary | dialog turn | mean |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut best: Option<(f64, HybridConfig)> = None;
    for w in [0.3f32, 0.4, 0.5] {
        for bm25_lift in [0.5f32, 0.7] {
            for dense_lift in [0.0f32, 0.25, 0.5, 0.75] {
                let config = HybridConfig {
                    fusion: Fusion::Weighted { dense_weight: w },
                    bm25: Bm25Params {
                        dir_weight: bm25_lift,
                        ..lifted()
                    },
                    dense_dir_weight: dense_lift,
                    ..base()
                };
                let (r5s, mean) = runner.unit_recalls(tune.clone(), true, &config).await?;
                println!(
                    "| {w} | {bm25_lift} | {dense_lift} | {:.1} | {:.1} | {:.1} | {mean:.1} |",
                    r5s[0], r5s[1], r5s[2]
                );
                if best.as_ref().is_none_or(|(m, _)| mean > *m) {
                    best = Some((mean, config));
                }
            }
        }
    }
    let Some((_, config)) = best else {
        bail!("no lifted candidates");
    };
    println!(
        "\nChosen on conversations 1–{}: {:?}, BM25 lift {}, dense lift {}\n",
        tune.end, config.fusion, config.bm25.dir_weight, config.dense_dir_weight
    );
    Ok(config)
}

/// All the semantic rows.
pub async fn run(
    convs: &[Conversation],
    inner: Arc<dyn Embedder>,
    cache_dir: &Path,
    params: Bm25Params,
    passages: bool,
) -> Result<()> {
    let _ = PARAMS.set(params);
    let _ = PASSAGES.set(passages);
    std::fs::create_dir_all(cache_dir)?;
    let embedder: Arc<dyn Embedder> = Arc::new(Memo {
        inner: inner.clone(),
        seen: Mutex::new(HashMap::new()),
    });
    let started = Instant::now();
    let mut dirs = Vec::new();
    for conv in convs {
        dirs.push([
            write_dir(&conv.observations, &conv.summaries).await?,
            write_dir(&conv.dialog, &conv.summaries).await?,
        ]);
    }
    let runner = Runner {
        convs,
        dirs: &dirs,
        embedder: embedder.clone(),
        cache_dir: cache_dir.to_owned(),
    };
    // Embed every memory once (from the vector cache when it has them).
    for i in 0..convs.len() {
        for unit in UNITS {
            for level in [unit.level, unit.lifted] {
                runner.hybrid(i, unit, level, dense_only()).await?;
            }
        }
    }
    eprintln!(
        "embedded all memories with {} in {:.1} s",
        inner.model_id(),
        started.elapsed().as_secs_f64()
    );
    let n = convs.len();
    let tune = 0..TUNE.min(n);
    let report = TUNE.min(n)..n;

    // 1. Choose the fusion on conversations 1–5: best mean R@5 over the three units.
    println!(
        "\nFusion sweep on conversations 1–{} (R@5 per unit; the best mean is used below):\n",
        tune.end
    );
    println!("| fusion | observation | session summary | dialog turn | mean |");
    println!("|---|---|---|---|---|");
    let mut best: Option<(f64, String, Fusion)> = None;
    for (name, fusion) in candidates() {
        let config = HybridConfig {
            fusion,
            bm25: flat(),
            ..base()
        };
        let (r5s, mean) = runner.unit_recalls(tune.clone(), false, &config).await?;
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {mean:.1} |",
            r5s[0], r5s[1], r5s[2]
        );
        if best.as_ref().is_none_or(|(m, _, _)| mean > *m) {
            best = Some((mean, name, fusion));
        }
    }
    let Some((_, best_name, fusion)) = best else {
        bail!("no fusion candidates");
    };
    println!("\nChosen on conversations 1–{}: {best_name}\n", tune.end);

    // The lifted rows' settings, chosen on conversations 1–5 like the fusion: the dense
    // weight, the BM25 lift and the dense half's lift, together.
    let hybrid_lifted = choose_lifted(&runner, tune.clone()).await?;
    let bm25_lift_only = HybridConfig {
        dense_dir_weight: 0.0,
        ..hybrid_lifted.clone()
    };

    // 2. The table: every selector on every unit, tuned half and held-out half.
    println!(
        "| selector | unit | R@5 conv 1–{} (tuning) | R@5 conv {}–{n} (held out) | R@10 held out | all 10 R@5 | all 10 R@10 |",
        tune.end,
        report.start + 1
    );
    println!("|---|---|---|---|---|---|---|");
    let hybrid = HybridConfig {
        fusion,
        bm25: flat(),
        ..base()
    };
    let halves = [tune.clone(), report.clone()];
    for unit in UNITS {
        let lift = if unit.name == "session summary" {
            "observation lift"
        } else {
            "summary lift"
        };
        let rows: Vec<(String, (Tally, Tally))> = vec![
            (
                "BM25".to_owned(),
                runner
                    .bm25_halves(&halves, unit, unit.level, flat())
                    .await?,
            ),
            (
                "dense alone".to_owned(),
                runner
                    .hybrid_halves(&halves, unit, unit.level, &dense_only())
                    .await?,
            ),
            (
                format!("hybrid ({best_name})"),
                runner
                    .hybrid_halves(&halves, unit, unit.level, &hybrid)
                    .await?,
            ),
            (
                format!("BM25 + {lift}"),
                runner
                    .bm25_halves(&halves, unit, unit.lifted, lifted())
                    .await?,
            ),
            (
                format!("hybrid + {lift} (BM25 half only)"),
                runner
                    .hybrid_halves(&halves, unit, unit.lifted, &bm25_lift_only)
                    .await?,
            ),
            (
                format!("hybrid + {lift} (both halves)"),
                runner
                    .hybrid_halves(&halves, unit, unit.lifted, &hybrid_lifted)
                    .await?,
            ),
        ];
        for (name, (tuned, held)) in rows {
            let mut all = tuned.clone();
            all.merge(&held);
            let (t5, _) = tuned.recall(None);
            let (h5, h10) = held.recall(None);
            let (a5, a10) = all.recall(None);
            println!(
                "| {name} | {} | {t5:.1} | **{h5:.1}** | {h10:.1} | {a5:.1} | {a10:.1} |",
                unit.name
            );
        }
    }
    latency(convs, inner, embedder, &hybrid).await
}

/// Selection latency, index build time and cache size at 2,000 memories (observations of all
/// conversations in one memory dir).
async fn latency(
    convs: &[Conversation],
    plain: Arc<dyn Embedder>,
    memo: Arc<dyn Embedder>,
    config: &HybridConfig,
) -> Result<()> {
    const SIZE: usize = 2_000;
    let tmp = tempfile::tempdir()?;
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path().join("memory"))?);
    let mut written = 0;
    'outer: for (i, conv) in convs.iter().enumerate() {
        for u in &conv.observations {
            if written == SIZE {
                break 'outer;
            }
            let doc = memloop_store::MemoryDoc::new(
                &u.name,
                &u.description,
                memloop_store::MemoryType::User,
                &u.body,
            );
            store
                .write(
                    &format!("conv-{i:02}/{}", u.rel),
                    &doc,
                    memloop_store::WriteMode::Overwrite,
                )
                .await?;
            written += 1;
        }
    }
    let headers: Vec<MemoryHeader> = store
        .scan()
        .await?
        .into_iter()
        .filter(|h| is_observation(&h.rel_path))
        .collect();
    let cache = tmp.path().join("vectors.bin");
    let cold =
        HybridSelector::with_config(store.clone(), plain.clone(), cache.clone(), config.clone());
    let t = Instant::now();
    let built = cold.warm(&headers).await?;
    let build = t.elapsed();
    let size = std::fs::metadata(&cache).map(|m| m.len()).unwrap_or(0);
    println!(
        "\nAt {} memories (observations of all conversations, one dir), {}:\n",
        headers.len(),
        plain.model_id()
    );
    println!(
        "- index build (embedding {} memories from cold, on this machine's CPU): {:.1} s; cache file {:.1} MB",
        built.embedded,
        build.as_secs_f64(),
        size as f64 / 1e6
    );
    let t = Instant::now();
    let reopened =
        HybridSelector::with_config(store.clone(), memo.clone(), cache.clone(), config.clone());
    reopened.warm(&headers).await?;
    println!(
        "- next session: cache loaded and checked in {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let questions: Vec<&str> = convs
        .iter()
        .flat_map(|c| &c.questions)
        .map(|q| q.text.as_str())
        .collect();
    // Excluding the query's embedding: every question embedded beforehand (memoised).
    let texts: Vec<String> = questions.iter().map(|q| (*q).to_owned()).collect();
    memo.embed_queries_checked(&texts).await?;
    let ctx = SelectionContext::with_limit(5);
    let mut excluding = Vec::new();
    let reopened: &dyn Selector = &reopened;
    for q in &questions {
        let t = Instant::now();
        reopened.select_checked(q, &headers, &ctx).await?;
        excluding.push(t.elapsed());
    }
    // Including it: the plain embedder, a fresh embedding per question.
    let live = HybridSelector::with_config(store, plain, cache, config.clone());
    let sample: Vec<&&str> = questions.iter().step_by(4).collect();
    let mut including = Vec::new();
    let live: &dyn Selector = &live;
    for q in &sample {
        let t = Instant::now();
        live.select_checked(q, &headers, &ctx).await?;
        including.push(t.elapsed());
    }
    let pct = |v: &mut Vec<Duration>, p: f64| {
        v.sort();
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        v.get(i).copied().unwrap_or_default().as_secs_f64() * 1e3
    };
    println!(
        "- selection excluding the query's embedding ({} queries): p50 {:.2} ms, p99 {:.2} ms",
        excluding.len(),
        pct(&mut excluding, 0.5),
        pct(&mut excluding, 0.99)
    );
    println!(
        "- selection including the query's embedding ({} queries): p50 {:.2} ms, p99 {:.2} ms",
        including.len(),
        pct(&mut including, 0.5),
        pct(&mut including, 0.99)
    );
    Ok(())
}
