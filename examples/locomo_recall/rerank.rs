//! `--rerank openai:<base url>#<model>`: the held-out BM25 short lists (conversations 6–10, the
//! three units of `--tune` with their lift) re-ranked by a real model through
//! [`RerankSelector`], against BM25 alone ON THE SAME QUESTIONS (`--questions N`: every k-th
//! held-out question), with the latency of each re-ranked selection and how many answers
//! degraded (model failed, timed out, or answered without a selection).
//!
//! The model's timeout is `LlmSelectorConfig`'s default (10 s) unless `--rerank-timeout SECS`
//! says otherwise (a small model on a slow CPU may need longer; the default is not changed).
//!
//! One model call per question and unit: the default re-ranker ([`RerankConfig::default`],
//! backfill on) and `MemorySetup::rerank(true)`'s (backfill off: only the model's picks) see the
//! same answer, through a memo in front of the model.

use crate::tuning::UNITS;
use crate::{Conversation, Dir, Tally, evaluate_with, level_headers, write_dir};
use anyhow::{Result, bail};
use memloop_core::CancellationToken;
use memloop_core::events::VecSink;
use memloop_core::model::{Model, ModelError, ModelRequest, ModelResponse};
use memloop_recall::{
    Bm25Params, Bm25Selector, LlmSelector, LlmSelectorConfig, RecallEvent, RerankConfig,
    RerankSelector, SelectionContext, Selector,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Conversations 1–5 are the tuning half; only 6–10 are asked.
const TUNE: usize = 5;

/// The chat model a `--rerank` spec names: `openai:<base url>#<model>` (feature `providers`),
/// built as the project builds any OpenAI-compatible model (`OpenAiCompatModel`, default
/// settings; `OPENAI_API_KEY` if set).
pub fn model(spec: &str) -> Result<Arc<dyn Model>> {
    let Some(rest) = spec.strip_prefix("openai:") else {
        bail!("--rerank expects openai:<base url>#<model>, got {spec}");
    };
    #[cfg(feature = "providers")]
    {
        use memloop_providers::{OpenAiCompatModel, OpenAiConfig};
        let (url, model) = crate::semantic::openai_endpoint(rest)?;
        let mut config = OpenAiConfig::new(url, model);
        config.api_key = std::env::var("OPENAI_API_KEY").ok();
        Ok(Arc::new(OpenAiCompatModel::new(config)?))
    }
    #[cfg(not(feature = "providers"))]
    bail!("`--rerank openai:{rest}` needs `--features providers`")
}

type Answers = Mutex<HashMap<String, Result<ModelResponse, ModelError>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Answers each distinct request once: the second re-ranker gets the first one's answer. A call
/// abandoned half-way (the selector's timeout drops it) is remembered as timed out.
struct Memo {
    inner: Arc<dyn Model>,
    seen: Answers,
    /// The first few answers' text, to show what the model says.
    samples: Mutex<Vec<String>>,
}

/// Records a timeout for `key` when the call holding it is dropped before it finishes.
struct Abandoned<'a> {
    seen: &'a Answers,
    key: Option<String>,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            lock(self.seen).insert(key, Err(ModelError::Timeout));
        }
    }
}

#[async_trait::async_trait]
impl Model for Memo {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn complete(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        // Keyed by the prompt's text: every message carries a fresh random id.
        let key = format!(
            "{}\n{}",
            request.system.join("\n"),
            request.last_user_text().unwrap_or_default()
        );
        if let Some(answer) = lock(&self.seen).get(&key) {
            return answer.clone();
        }
        let mut pending = Abandoned {
            seen: &self.seen,
            key: Some(key.clone()),
        };
        let answer = self.inner.complete(request, cancel).await;
        pending.key = None;
        if let Ok(r) = &answer {
            let mut samples = lock(&self.samples);
            if samples.len() < 3 {
                samples.push(r.text_content());
            }
        }
        lock(&self.seen).insert(key, answer.clone());
        answer
    }
}

/// Per unit: the three rankings' recall on the sample, BM25 on every held-out question, the
/// re-ranked selections' latencies, and what went wrong.
#[derive(Default)]
struct Row {
    bm25: Tally,
    reranked: Tally,
    picks_only: Tally,
    bm25_all: Tally,
    timeouts: usize,
    unparsable: usize,
    failed: usize,
    /// The model answered with a list, but nothing on it was on the short list it was shown.
    no_pick: usize,
    /// Picks the model made that were on its short list (answers that did not degrade).
    picks: usize,
    /// Questions whose first memory the re-ranker changed.
    new_top: usize,
}

impl Row {
    fn degraded(&self) -> usize {
        self.timeouts + self.unparsable + self.failed
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Run the comparison and print its table.
pub async fn run(
    convs: &[Conversation],
    spec: &str,
    questions: Option<usize>,
    timeout: Option<Duration>,
    params: Bm25Params,
) -> Result<()> {
    // The selector's settings: the defaults, but for `--rerank-timeout`.
    let selector_config = LlmSelectorConfig {
        timeout: timeout.unwrap_or(LlmSelectorConfig::default().timeout),
        ..LlmSelectorConfig::default()
    };
    let n = convs.len();
    let held = TUNE.min(n)..n;
    let all: Vec<(usize, usize)> = held
        .clone()
        .flat_map(|c| (0..convs[c].questions.len()).map(move |q| (c, q)))
        .collect();
    if all.is_empty() {
        bail!("no held-out questions (conversations 6–10)");
    }
    let want = questions.unwrap_or(all.len()).clamp(1, all.len());
    let step = all.len() / want;
    let sample: HashSet<(usize, usize)> = all.iter().step_by(step).take(want).copied().collect();
    let mut dirs: HashMap<usize, [Dir; 2]> = HashMap::new();
    for c in held.clone() {
        let conv = &convs[c];
        dirs.insert(
            c,
            [
                write_dir(&conv.observations, &conv.summaries).await?,
                write_dir(&conv.dialog, &conv.summaries).await?,
            ],
        );
    }
    let memo = Arc::new(Memo {
        inner: model(spec)?,
        seen: Mutex::new(HashMap::new()),
        samples: Mutex::new(Vec::new()),
    });
    let lifted = crate::lifted(params);
    println!(
        "\nRe-ranking BM25's short list (20) with `{}` on {} of the {} held-out questions \
         (conversations {}–{n}, every {step}th), per unit with its lift; model timeout {} s:\n",
        memo.name(),
        sample.len(),
        all.len(),
        held.start + 1,
        selector_config.timeout.as_secs_f64()
    );
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut asked = 0;
    for unit in &UNITS {
        let level = unit.lifted;
        let mut row = Row::default();
        for c in held.clone() {
            let Some(dir) = dirs.get(&c).map(|d| &d[unit.dir]) else {
                continue;
            };
            let conv = &convs[c];
            let headers = level_headers(level, dir);
            let bm25 = Arc::new(Bm25Selector::with_params(dir.store.clone(), lifted));
            bm25.sync(&headers).await;
            evaluate_with(bm25.as_ref(), level, dir, conv, &mut row.bm25_all).await?;
            let llm = || LlmSelector::with_config(memo.clone(), selector_config.clone());
            let reranked = RerankSelector::new(bm25.clone(), llm());
            let picks_only = RerankSelector::with_config(
                bm25.clone(),
                llm(),
                RerankConfig {
                    backfill: false,
                    ..RerankConfig::default()
                },
            );
            let sink = Arc::new(VecSink::default());
            let ctx = SelectionContext {
                already_surfaced: headers
                    .iter()
                    .filter(|h| !level.returns(&h.rel_path))
                    .map(|h| h.rel_path.clone())
                    .collect(),
                events: sink.clone(),
                ..SelectionContext::with_limit(10)
            };
            for (i, q) in conv.questions.iter().enumerate() {
                if !sample.contains(&(c, i)) {
                    continue;
                }
                let bm25: &dyn Selector = bm25.as_ref();
                let first = bm25.select_checked(&q.text, &headers, &ctx).await?;
                let t = Instant::now();
                let reranked: &dyn Selector = &reranked;
                let again = reranked.select_checked(&q.text, &headers, &ctx).await?;
                row.reranked.latencies.push(t.elapsed());
                let picks_only: &dyn Selector = &picks_only;
                let picked = picks_only.select_checked(&q.text, &headers, &ctx).await?;
                // One event per degraded selection; the second re-ranker's repeats the first's.
                let events = sink.take();
                let reason = events.iter().find_map(|e| match e.extension() {
                    Some(RecallEvent::RecallDegraded { reason, .. }) => Some(reason.clone()),
                    _ => None,
                });
                match reason {
                    Some(r) if r.contains("timed out") => row.timeouts += 1,
                    Some(r) if r.contains("no selected_memories") => row.unparsable += 1,
                    Some(_) => row.failed += 1,
                    None if picked.is_empty() => row.no_pick += 1,
                    None => row.picks += picked.len(),
                }
                if first.first() != again.first() {
                    row.new_top += 1;
                }
                let covered = |chosen: &[String], k: usize| dir.covered(chosen, k);
                row.bm25.add(q, &covered(&first, 5), &covered(&first, 10));
                row.reranked
                    .add(q, &covered(&again, 5), &covered(&again, 10));
                row.picks_only
                    .add(q, &covered(&picked, 5), &covered(&picked, 10));
                asked += 1;
                if asked % 25 == 0 {
                    eprintln!(
                        "{asked} of {} selections re-ranked in {:.0} s",
                        3 * sample.len(),
                        started.elapsed().as_secs_f64()
                    );
                }
            }
        }
        rows.push((unit.name, row));
    }
    let wall = started.elapsed();
    println!(
        "| unit (first stage: BM25 + lift) | questions | BM25 R@5 / R@10 | re-ranked, backfill (default) R@5 / R@10 | model's picks only (`MemorySetup::rerank`) R@5 / R@10 | p50 | p99 | degraded: timeout / unparsable / model error | no valid pick | first memory changed | BM25 R@5, all held-out questions |"
    );
    println!("|---|---:|---|---|---|---:|---:|---|---:|---:|---:|");
    let mut latencies = Vec::new();
    for (name, row) in &rows {
        let q = row.reranked.latencies.len();
        let (b5, b10) = row.bm25.recall(None);
        let (r5, r10) = row.reranked.recall(None);
        let (p5, p10) = row.picks_only.recall(None);
        println!(
            "| {name} | {q} | {b5:.1} / {b10:.1} | **{r5:.1}** / {r10:.1} | {p5:.1} / {p10:.1} | {:.0} ms | {:.0} ms | {} / {} / {} | {} | {} | {:.1} (of {}) |",
            ms(row.reranked.percentile(0.5)),
            ms(row.reranked.percentile(0.99)),
            row.timeouts,
            row.unparsable,
            row.failed,
            row.no_pick,
            row.new_top,
            row.bm25_all.recall(None).0,
            row.bm25_all.latencies.len(),
        );
        latencies.extend(&row.reranked.latencies);
    }
    let all_rows = Tally {
        latencies,
        ..Tally::default()
    };
    let calls = all_rows.latencies.len();
    let degraded: usize = rows.iter().map(|(_, r)| r.degraded()).sum();
    let answered = calls - degraded;
    let picks: usize = rows.iter().map(|(_, r)| r.picks).sum();
    println!(
        "\n{calls} re-ranked selections in {:.0} s ({:.2} s each on average; p50 {:.0} ms, p99 {:.0} ms); \
         {degraded} degraded to BM25's order; {answered} answered with {:.2} valid picks on average.",
        wall.as_secs_f64(),
        wall.as_secs_f64() / calls.max(1) as f64,
        ms(all_rows.percentile(0.5)),
        ms(all_rows.percentile(0.99)),
        picks as f64 / answered.max(1) as f64,
    );
    for (i, text) in lock(&memo.samples).iter().enumerate() {
        let text = memloop_text::truncate_utf8(text, 300).replace('\n', " ");
        println!("\nAnswer {}: {text}", i + 1);
    }
    Ok(())
}
