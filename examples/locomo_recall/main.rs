//! LoCoMo recall benchmark: the no-model selectors, and with `--embed` the semantic ones.
//!
//! ```text
//! cargo run --release --example locomo_recall -- ../shared/data/locomo/locomo10.json
//! # plus rows for PostgreSQL full-text search (memloop-pg's PgFtsSelector):
//! cargo run --release --example locomo_recall -- ../shared/data/locomo/locomo10.json \
//!     --pg "host=127.0.0.1 user=root dbname=test"
//! # plus BM25 / dense / hybrid on observations, summaries and dialog turns (semantic.rs):
//! cargo run --release --features candle --example locomo_recall -- \
//!     ../shared/data/locomo/locomo10.json --embed candle:<all-MiniLM-L6-v2 dir> \
//!     [--vector-cache target/locomo-vectors] [--no-passages] [--prefixes e5|bge]
//! # the lexical levers (BM25F weights, pseudo-relevance feedback) chosen on conversations 1–5
//! # and reported on 6–10 (tuning.rs):
//! cargo run --release --example locomo_recall -- ../shared/data/locomo/locomo10.json --tune
//! # the held-out BM25 short lists re-ranked by a chat model (rerank.rs), against BM25 alone on
//! # the same N questions (every k-th of conversations 6–10):
//! cargo run --release --features providers --example locomo_recall -- \
//!     ../shared/data/locomo/locomo10.json --rerank openai:http://127.0.0.1:8089/v1#local \
//!     [--questions N] [--rerank-timeout SECS]
//! ```
//!
//! Per conversation, every observation (level `observation`) and every session summary (level
//! `summary`) becomes a memory file; `combined` holds both, one directory per session, and uses
//! the BM25 directory lift. Each QA question is the query; Recall@k is the share of the
//! question's evidence turns covered by the k selected memories (an observation covers its turn
//! ids, a summary every turn of its session). The data set (CC BY-NC 4.0) is read from the given
//! path and never copied.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod rerank;
mod semantic;
mod tuning;

use anyhow::{Context, Result, bail};
use memloop_files::FileMemoryStore;
use memloop_recall::{Bm25Params, Bm25Selector, KeywordSelector, SelectionContext, Selector};
use memloop_store::{MemoryDoc, MemoryHeader, MemoryStore, MemoryType, WriteMode};
use regex::Regex;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CATEGORIES: [(u64, &str); 5] = [
    (1, "multi-hop"),
    (2, "temporal"),
    (3, "open-domain"),
    (4, "single-hop"),
    (5, "adversarial"),
];

/// One memory built from the data set, with the turn ids it covers.
struct Unit {
    rel: String,
    name: String,
    description: String,
    body: String,
    ids: HashSet<String>,
}

struct Question {
    text: String,
    category: u64,
    evidence: HashSet<String>,
}

struct Conversation {
    observations: Vec<Unit>,
    /// The same observations with the text of their source turns appended.
    quoted: Vec<Unit>,
    /// Every dialog turn as a memory.
    dialog: Vec<Unit>,
    summaries: Vec<Unit>,
    questions: Vec<Question>,
}

#[derive(Default)]
struct Stats {
    dropped_bad_ids: usize,
    skipped_no_evidence: usize,
}

fn ids_in(re: &Regex, v: &Value) -> Vec<String> {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    re.captures_iter(&text)
        .filter_map(|c| {
            Some(format!(
                "D{}:{}",
                c[1].parse::<u32>().ok()?,
                c[2].parse::<u32>().ok()?
            ))
        })
        .collect()
}

fn parse(sample: &Value, re: &Regex, stats: &mut Stats) -> Result<Conversation> {
    let conv = sample["conversation"]
        .as_object()
        .context("no conversation")?;
    let mut turns_of: BTreeMap<u64, HashSet<String>> = BTreeMap::new();
    let mut dates: HashMap<u64, String> = HashMap::new();
    let mut turn_text: HashMap<String, String> = HashMap::new();
    let mut turn_rows: Vec<(u64, String, String, String)> = Vec::new();
    for (key, value) in conv {
        let Some(n) = key.strip_prefix("session_") else {
            continue;
        };
        if let Some(num) = n.strip_suffix("_date_time").and_then(|n| n.parse().ok()) {
            dates.insert(num, value.as_str().unwrap_or("").to_owned());
        } else if let (Ok(num), Some(turns)) = (n.parse::<u64>(), value.as_array()) {
            for t in turns {
                if let Some(id) = t["dia_id"].as_str() {
                    turns_of.entry(num).or_default().insert(id.to_owned());
                    let text = t["text"].as_str().unwrap_or("");
                    let caption = t["blip_caption"]
                        .as_str()
                        .map(|c| format!(" [shares a photo: {c}]"))
                        .unwrap_or_default();
                    turn_text.insert(id.to_owned(), format!("{text}{caption}"));
                    let speaker = t["speaker"].as_str().unwrap_or("someone").to_owned();
                    turn_rows.push((num, id.to_owned(), speaker, format!("{text}{caption}")));
                }
            }
        }
    }
    let all_turns: HashSet<&String> = turns_of.values().flatten().collect();
    let mut observations = Vec::new();
    let mut quoted = Vec::new();
    if let Some(obs) = sample["observation"].as_object() {
        for (key, per_speaker) in obs {
            let Some(num) = session_number(key) else {
                continue;
            };
            let date = dates.get(&num).cloned().unwrap_or_default();
            for (speaker, facts) in per_speaker.as_object().into_iter().flatten() {
                for (i, fact) in facts.as_array().into_iter().flatten().enumerate() {
                    let text = fact[0].as_str().unwrap_or("").to_owned();
                    let ids: HashSet<String> = ids_in(re, &fact[1]).into_iter().collect();
                    let mut sorted: Vec<&String> = ids.iter().collect();
                    sorted.sort();
                    let quotes: Vec<String> = sorted
                        .iter()
                        .filter_map(|i| turn_text.get(*i))
                        .map(|t| format!("> {t}"))
                        .collect();
                    let body = format!("{text}\n\nSaid by {speaker} on {date}.");
                    let unit = |body: String| Unit {
                        rel: format!("session-{num:02}/{}-{i:03}.md", speaker.to_lowercase()),
                        name: format!("{speaker}, session {num}"),
                        description: text.clone(),
                        body,
                        ids: ids.clone(),
                    };
                    quoted.push(unit(format!("{body}\n{}", quotes.join("\n"))));
                    observations.push(unit(body));
                }
            }
        }
    }
    // Every dialog turn as a memory of its own (the LoCoMo paper's "dialog" retrieval unit).
    let dialog = turn_rows
        .into_iter()
        .enumerate()
        .map(|(i, (num, id, speaker, text))| {
            let date = dates.get(&num).cloned().unwrap_or_default();
            Unit {
                rel: format!("session-{num:02}/turn-{i:04}.md"),
                name: format!("{speaker}, session {num}"),
                description: text.clone(),
                body: format!("{text}\n\nSaid by {speaker} on {date}."),
                ids: [id].into_iter().collect(),
            }
        })
        .collect();
    let mut summaries = Vec::new();
    if let Some(sums) = sample["session_summary"].as_object() {
        for (key, text) in sums {
            let Some(num) = session_number(key) else {
                continue;
            };
            let text = text.as_str().unwrap_or("");
            let first = text.split(". ").next().unwrap_or(text);
            summaries.push(Unit {
                rel: format!("session-{num:02}/summary.md"),
                name: format!("Session {num} summary"),
                description: first.to_owned(),
                body: text.to_owned(),
                ids: turns_of.get(&num).cloned().unwrap_or_default(),
            });
        }
    }
    let mut questions = Vec::new();
    for qa in sample["qa"].as_array().into_iter().flatten() {
        let raw = ids_in(re, &qa["evidence"]);
        let evidence: HashSet<String> = raw
            .iter()
            .filter(|e| all_turns.contains(e))
            .cloned()
            .collect();
        stats.dropped_bad_ids += raw.iter().filter(|e| !all_turns.contains(e)).count();
        if evidence.is_empty() {
            stats.skipped_no_evidence += 1;
            continue;
        }
        questions.push(Question {
            text: qa["question"].as_str().unwrap_or("").to_owned(),
            category: qa["category"].as_u64().unwrap_or(0),
            evidence,
        });
    }
    Ok(Conversation {
        observations,
        quoted,
        dialog,
        summaries,
        questions,
    })
}

fn session_number(key: &str) -> Option<u64> {
    key.strip_prefix("session_")?
        .split('_')
        .next()?
        .parse()
        .ok()
}

/// Recall sums per category for k = 5 and 10.
#[derive(Default, Clone)]
struct Tally {
    by_cat: BTreeMap<u64, (f64, f64, usize)>,
    latencies: Vec<Duration>,
    build: Duration,
    memories: usize,
}

impl Tally {
    fn add(&mut self, q: &Question, covered5: &HashSet<&String>, covered10: &HashSet<&String>) {
        let share = |c: &HashSet<&String>| {
            q.evidence.iter().filter(|e| c.contains(e)).count() as f64 / q.evidence.len() as f64
        };
        let e = self.by_cat.entry(q.category).or_default();
        e.0 += share(covered5);
        e.1 += share(covered10);
        e.2 += 1;
    }

    fn merge(&mut self, other: &Tally) {
        for (cat, (a, b, n)) in &other.by_cat {
            let e = self.by_cat.entry(*cat).or_default();
            e.0 += a;
            e.1 += b;
            e.2 += n;
        }
        self.latencies.extend(&other.latencies);
        self.build += other.build;
        self.memories += other.memories;
    }

    fn recall(&self, cat: Option<u64>) -> (f64, f64) {
        let (mut r5, mut r10, mut n) = (0.0, 0.0, 0);
        for (c, (a, b, m)) in &self.by_cat {
            if cat.is_none_or(|x| x == *c) {
                r5 += a;
                r10 += b;
                n += m;
            }
        }
        let n = n.max(1) as f64;
        (100.0 * r5 / n, 100.0 * r10 / n)
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut l = self.latencies.clone();
        l.sort();
        let i = ((l.len() as f64 - 1.0) * p).round() as usize;
        l.get(i).copied().unwrap_or_default()
    }
}

/// One conversation written into a real memory dir (tempdir) through [`FileMemoryStore`]:
/// `session-NN/<speaker>-NNN.md` observations and `session-NN/summary.md` summaries.
struct Dir {
    _tmp: tempfile::TempDir,
    store: Arc<dyn MemoryStore>,
    headers: Vec<MemoryHeader>,
    units: HashMap<String, HashSet<String>>,
}

impl Dir {
    /// The evidence turns covered by the first `k` of `chosen`.
    fn covered<'a>(&'a self, chosen: &[String], k: usize) -> HashSet<&'a String> {
        chosen
            .iter()
            .take(k)
            .filter_map(|p| self.units.get(p))
            .flatten()
            .collect()
    }
}

async fn write_dir(observations: &[Unit], summaries: &[Unit]) -> Result<Dir> {
    let tmp = tempfile::tempdir()?;
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path().join("memory"))?);
    let mut units = HashMap::new();
    for u in observations.iter().chain(summaries) {
        let doc = MemoryDoc {
            name: u.name.clone(),
            description: u.description.clone(),
            memory_type: Some(MemoryType::User),
            body: u.body.clone(),
        };
        store.write(&u.rel, &doc, WriteMode::Overwrite).await?;
        units.insert(u.rel.clone(), u.ids.clone());
    }
    let headers = store.scan().await?;
    Ok(Dir {
        _tmp: tmp,
        store,
        headers,
        units,
    })
}

/// Which memories a run indexes and which it may return.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    Observation,
    ObservationLifted,
    Summary,
    SummaryLifted,
    Combined,
}

impl Level {
    fn indexes(self, path: &str) -> bool {
        match self {
            Self::Observation => is_observation(path),
            Self::Summary => is_summary(path),
            _ => true,
        }
    }

    fn returns(self, path: &str) -> bool {
        match self {
            Self::Observation | Self::ObservationLifted => is_observation(path),
            Self::Summary | Self::SummaryLifted => is_summary(path),
            Self::Combined => true,
        }
    }
}

/// Evaluate one selector over one level of one conversation.
async fn evaluate(
    kind: &str,
    params: Bm25Params,
    level: Level,
    dir: &Dir,
    conv: &Conversation,
    tally: &mut Tally,
) -> Result<()> {
    let headers = level_headers(level, dir);
    let selector: Arc<dyn Selector> = if kind == "keyword" {
        Arc::new(KeywordSelector::default())
    } else {
        let bm25 = Bm25Selector::with_params(dir.store.clone(), params);
        let started = Instant::now();
        bm25.sync(&headers).await;
        tally.build += started.elapsed();
        Arc::new(bm25)
    };
    evaluate_with(selector.as_ref(), level, dir, conv, tally).await
}

/// The memories a level indexes.
fn level_headers(level: Level, dir: &Dir) -> Vec<MemoryHeader> {
    dir.headers
        .iter()
        .filter(|h| level.indexes(&h.rel_path))
        .cloned()
        .collect()
}

/// Ask every question of `conv` of `selector` (already built over `dir`) and tally recall.
async fn evaluate_with(
    selector: &dyn Selector,
    level: Level,
    dir: &Dir,
    conv: &Conversation,
    tally: &mut Tally,
) -> Result<()> {
    let headers = level_headers(level, dir);
    let hidden: HashSet<String> = headers
        .iter()
        .filter(|h| !level.returns(&h.rel_path))
        .map(|h| h.rel_path.clone())
        .collect();
    tally.memories += headers.len() - hidden.len();
    let ctx = SelectionContext {
        already_surfaced: hidden,
        ..SelectionContext::with_limit(10)
    };
    for q in &conv.questions {
        let t = Instant::now();
        let chosen = selector.select_checked(&q.text, &headers, &ctx).await?;
        tally.latencies.push(t.elapsed());
        tally.add(q, &dir.covered(&chosen, 5), &dir.covered(&chosen, 10));
    }
    Ok(())
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if entry.file_name() != "MEMORY.md" {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// All conversations' memories (observations with source turns, and summaries) in ONE memory
/// dir, one sub-dir per conversation: selection latency at a realistic size, and recall when
/// every other conversation competes.
async fn pooled(convs: &[Conversation], dirs: &[(Dir, Dir)], params: Bm25Params) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("memory");
    let mut units: HashMap<String, (usize, HashSet<String>)> = HashMap::new();
    for (i, (_, quoted)) in dirs.iter().enumerate() {
        let description = quoted.store.describe();
        let from = description
            .dir()
            .ok_or_else(|| std::io::Error::other("the quoted store is not a directory"))?;
        copy_tree(from, &root.join(format!("conv-{i:02}")))?;
        for (rel, ids) in &quoted.units {
            units.insert(format!("conv-{i:02}/{rel}"), (i, ids.clone()));
        }
    }
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(&root)?);
    let headers = store.scan().await?;
    let all_obs: Vec<MemoryHeader> = headers
        .iter()
        .filter(|h| is_observation(&h.rel_path))
        .cloned()
        .collect();
    for (name, headers, p) in [
        ("bm25", &all_obs, params),
        (
            "bm25 + summary lift",
            &headers,
            Bm25Params {
                dir_weight: 0.5,
                ..params
            },
        ),
    ] {
        let bm25 = Bm25Selector::with_params(store.clone(), p);
        let started = Instant::now();
        bm25.sync(headers).await;
        let build = started.elapsed();
        let hidden: HashSet<String> = headers
            .iter()
            .filter(|h| is_summary(&h.rel_path))
            .map(|h| h.rel_path.clone())
            .collect();
        let ctx = SelectionContext {
            already_surfaced: hidden,
            ..SelectionContext::with_limit(10)
        };
        let selector: Arc<dyn Selector> = Arc::new(bm25);
        let mut tally = Tally {
            build,
            memories: all_obs.len(),
            ..Tally::default()
        };
        for (i, conv) in convs.iter().enumerate() {
            for q in &conv.questions {
                let t = Instant::now();
                let chosen = selector.select_checked(&q.text, headers, &ctx).await?;
                tally.latencies.push(t.elapsed());
                let covered = |k: usize| -> HashSet<&String> {
                    chosen
                        .iter()
                        .take(k)
                        .filter_map(|p| units.get(p))
                        .filter(|(c, _)| *c == i)
                        .flat_map(|(_, ids)| ids)
                        .collect()
                };
                tally.add(q, &covered(5), &covered(10));
            }
        }
        let (r5, r10) = tally.recall(None);
        println!(
            "| {name} | all 10 conversations in one dir ({} observations, {} memories indexed) | R@5 {r5:.1} | R@10 {r10:.1} | p50 {:.0} µs | p99 {:.0} µs | index build {:.0} ms |",
            tally.memories,
            headers.len(),
            tally.percentile(0.5).as_secs_f64() * 1e6,
            tally.percentile(0.99).as_secs_f64() * 1e6,
            tally.build.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

fn is_summary(p: &str) -> bool {
    p.ends_with("/summary.md")
}

fn is_observation(p: &str) -> bool {
    !is_summary(p)
}

fn parse_params(spec: &str) -> Result<Bm25Params> {
    let mut p = Bm25Params::default();
    for kv in spec.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .context("--bm25 expects key=value pairs")?;
        let v: f32 = v.parse().with_context(|| format!("bad number in {kv}"))?;
        match k {
            "k1" => p.k1 = v,
            "b" => p.b = v,
            "name" => p.name_weight = v,
            "desc" => p.description_weight = v,
            "body" => p.body_weight = v,
            "bigram" => {
                p.bigrams = v > 0.0;
                p.bigram_weight = v;
            }
            "dir" => p.dir_weight = v,
            "coord" => p.coordination = v,
            "fb_docs" => p.feedback_docs = v as usize,
            "fb_terms" => p.feedback_terms = v as usize,
            "fb_weight" => p.feedback_weight = v,

            other => bail!("unknown --bm25 key `{other}`"),
        }
    }
    Ok(p)
}

/// `params` with the directory lift on: their own `dir_weight`, or 0.5 when they have none.
fn lifted(params: Bm25Params) -> Bm25Params {
    Bm25Params {
        dir_weight: if params.dir_weight > 0.0 {
            params.dir_weight
        } else {
            0.5
        },
        ..params
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        bail!("usage: locomo_recall <path to locomo10.json> [--bm25 k1=1.2,b=0.75,desc=2,...]");
    };
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    let params = match args.iter().position(|a| a == "--bm25") {
        Some(i) => parse_params(args.get(i + 1).map_or("", String::as_str))?,
        None => Bm25Params::default(),
    };
    let text = std::fs::read_to_string(path).with_context(|| {
        format!("cannot read the LoCoMo data at `{path}` (get it from snap-research/LoCoMo, data/locomo10.json)")
    })?;
    let data: Value = serde_json::from_str(&text).context("locomo10.json is not valid JSON")?;
    let re = Regex::new(r"D:?(\d+):(\d+)")?;
    let mut stats = Stats::default();
    let convs = data
        .as_array()
        .context("expected a JSON array of conversations")?
        .iter()
        .map(|s| parse(s, &re, &mut stats))
        .collect::<Result<Vec<_>>>()?;
    if let Some(spec) = flag("--rerank") {
        let questions = flag("--questions")
            .map(|n| n.parse::<usize>().context("--questions expects a number"))
            .transpose()?;
        let timeout = flag("--rerank-timeout")
            .map(|s| s.parse::<f64>().context("--rerank-timeout expects seconds"))
            .transpose()?
            .map(Duration::try_from_secs_f64)
            .transpose()
            .context("--rerank-timeout expects seconds")?;
        return rerank::run(&convs, spec, questions, timeout, params).await;
    }
    if args.iter().any(|a| a == "--tune") {
        return tuning::run(&convs, params, flag("--tune") == Some("feedback")).await;
    }
    let flat = Bm25Params {
        dir_weight: 0.0,
        ..params
    };
    let lifted = lifted(params);
    let runs: Vec<(&str, &str, bool, Level, Bm25Params)> = vec![
        ("keyword", "observation", false, Level::Observation, flat),
        ("bm25", "observation", false, Level::Observation, flat),
        (
            "bm25 + summary lift",
            "observation",
            false,
            Level::ObservationLifted,
            lifted,
        ),
        (
            "keyword",
            "observation + source turn",
            true,
            Level::Observation,
            flat,
        ),
        (
            "bm25",
            "observation + source turn",
            true,
            Level::Observation,
            flat,
        ),
        (
            "bm25 + summary lift",
            "observation + source turn",
            true,
            Level::ObservationLifted,
            lifted,
        ),
        ("keyword", "summary", false, Level::Summary, flat),
        ("bm25", "summary", false, Level::Summary, flat),
        (
            "bm25 + observation lift",
            "summary",
            false,
            Level::SummaryLifted,
            lifted,
        ),
        (
            "bm25 + lift",
            "combined (both)",
            true,
            Level::Combined,
            lifted,
        ),
    ];
    let mut dirs = Vec::new();
    let started = Instant::now();
    for conv in &convs {
        let plain = write_dir(&conv.observations, &conv.summaries).await?;
        let quoted = write_dir(&conv.quoted, &conv.summaries).await?;
        dirs.push((plain, quoted));
    }
    eprintln!(
        "wrote {} memory dirs in {:.1} s",
        2 * dirs.len(),
        started.elapsed().as_secs_f64()
    );
    let questions: usize = convs.iter().map(|c| c.questions.len()).sum();
    println!(
        "LoCoMo: {} conversations, {questions} questions with evidence ({} skipped without evidence, {} evidence ids dropped: no such turn)\n",
        convs.len(),
        stats.skipped_no_evidence,
        stats.dropped_bad_ids
    );
    print!("| selector | level | memories/conv |");
    for (_, name) in CATEGORIES {
        print!(" {name} R@5/R@10 |");
    }
    println!(" overall R@5 | overall R@10 | p50 | p99 | index build/conv |");
    println!("|{}", "---|".repeat(13));
    for (kind, level_name, quoted, level, p) in runs {
        let mut tally = Tally::default();
        for (conv, (plain, with_quotes)) in convs.iter().zip(&dirs) {
            let dir = if quoted { with_quotes } else { plain };
            evaluate(kind, p, level, dir, conv, &mut tally).await?;
        }
        let level = level_name;
        print!(
            "| {kind} | {level} | {} |",
            tally.memories / convs.len().max(1)
        );
        for (cat, _) in CATEGORIES {
            let (r5, r10) = tally.recall(Some(cat));
            print!(" {r5:.1} / {r10:.1} |");
        }
        let (r5, r10) = tally.recall(None);
        println!(
            " **{r5:.1}** | {r10:.1} | {:.0} µs | {:.0} µs | {:.1} ms |",
            tally.percentile(0.5).as_secs_f64() * 1e6,
            tally.percentile(0.99).as_secs_f64() * 1e6,
            tally.build.as_secs_f64() * 1e3 / convs.len().max(1) as f64
        );
    }
    if let Some(url) = flag("--pg") {
        postgres_rows(url, &convs).await?;
    }
    println!("\nScale check (observation + source turn level):\n");
    pooled(&convs, &dirs, flat).await?;
    if let Some(spec) = flag("--embed") {
        let mut embedder = semantic::embedder(spec).await?;
        // An asymmetric model's query and passage prefixes (e5, bge English v1.5).
        match flag("--prefixes") {
            None | Some("none") => {}
            Some("e5") => embedder = Arc::new(memloop_core::embed::Prefixed::e5(embedder)),
            Some("bge") => embedder = Arc::new(memloop_core::embed::Prefixed::bge(embedder)),
            Some(other) => anyhow::bail!("--prefixes expects e5, bge or none, got {other}"),
        }
        let cache = flag("--vector-cache").unwrap_or("target/locomo-vectors");
        let passages = !args.iter().any(|a| a == "--no-passages");
        semantic::run(
            &convs,
            embedder,
            std::path::Path::new(cache),
            params,
            passages,
        )
        .await?;
    }
    Ok(())
}

/// The team store on the observation levels: one team-store project per conversation, in a
/// scratch schema dropped at the end, searched by the database's full-text search and by the
/// in-process BM25 over the same rows (what a team server uses).
async fn postgres_rows(url: &str, convs: &[Conversation]) -> Result<()> {
    use memloop_pg::{PgConfig, PgFtsSelector, PgMemoryStore};
    let schema = format!("memloop_locomo_{}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let result = async {
        for (ranker, level, quoted) in [
            ("postgres full-text", "observation", false),
            ("postgres full-text", "observation + source turn", true),
            ("team store, in-process BM25", "observation", false),
            ("team store, in-process BM25", "observation + source turn", true),
        ] {
            let in_process = ranker.starts_with("team");
            let mut tally = Tally::default();
            for (i, conv) in convs.iter().enumerate() {
                let config = PgConfig::new(url, format!("locomo-{i}-{quoted}-{in_process}"))
                    .schema(&schema);
                let store = PgMemoryStore::open(config).await?;
                let units = if quoted { &conv.quoted } else { &conv.observations };
                let mut ids = HashMap::new();
                for u in units {
                    let doc = MemoryDoc::new(&u.name, &u.description, MemoryType::User, &u.body);
                    store.write(&u.rel, &doc, WriteMode::Overwrite).await?;
                    ids.insert(u.rel.clone(), u.ids.clone());
                }
                let headers = store.scan().await?;
                tally.memories += headers.len();
                let selector: Arc<dyn Selector> = if in_process {
                    let bm25 = Bm25Selector::new(Arc::new(store));
                    bm25.sync(&headers).await;
                    Arc::new(bm25)
                } else {
                    Arc::new(PgFtsSelector::new(store))
                };
                for q in &conv.questions {
                    let t = Instant::now();
                    let chosen = selector
                        .select_checked(&q.text, &headers, &SelectionContext::with_limit(10))
                        .await?;
                    tally.latencies.push(t.elapsed());
                    let covered = |k: usize| -> HashSet<&String> {
                        chosen.iter().take(k).filter_map(|p| ids.get(p)).flatten().collect()
                    };
                    tally.add(q, &covered(5), &covered(10));
                }
            }
            let (r5, r10) = tally.recall(None);
            println!(
                "| {ranker} | {level} | {} | R@5 **{r5:.1}** | R@10 {r10:.1} | p50 {:.0} µs | p99 {:.0} µs |",
                tally.memories / convs.len().max(1),
                tally.percentile(0.5).as_secs_f64() * 1e6,
                tally.percentile(0.99).as_secs_f64() * 1e6,
            );
        }
        anyhow::Ok(())
    }
    .await;
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await?;
    result
}
