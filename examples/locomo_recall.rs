//! LoCoMo recall benchmark for the no-model selectors.
//!
//! ```text
//! cargo run --release --example locomo_recall -- ../shared/data/locomo/locomo10.json
//! ```
//!
//! Per conversation, every observation (level `observation`) and every session summary (level
//! `summary`) becomes a memory file; `combined` holds both, one directory per session, and uses
//! the BM25 directory lift. Each QA question is the query; Recall@k is the share of the
//! question's evidence turns covered by the k selected memories (an observation covers its turn
//! ids, a summary every turn of its session). The data set (CC BY-NC 4.0) is read from the given
//! path and never copied.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Context, Result, bail};
use memloop_memory::recall::{Bm25Index, Bm25Params, IndexText, KeywordSelector, SelectionContext, Selector};
use memloop_memory::{MemoryHeader, MemoryType};
use regex::Regex;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    id: String,
    observations: Vec<Unit>,
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
        .filter_map(|c| Some(format!("D{}:{}", c[1].parse::<u32>().ok()?, c[2].parse::<u32>().ok()?)))
        .collect()
}

fn parse(sample: &Value, re: &Regex, stats: &mut Stats) -> Result<Conversation> {
    let id = sample["sample_id"].as_str().unwrap_or("?").to_owned();
    let conv = sample["conversation"].as_object().context("no conversation")?;
    let mut turns_of: BTreeMap<u64, HashSet<String>> = BTreeMap::new();
    let mut dates: HashMap<u64, String> = HashMap::new();
    let mut turn_text: HashMap<String, String> = HashMap::new();
    for (key, value) in conv {
        let Some(n) = key.strip_prefix("session_") else { continue };
        if let Some(num) = n.strip_suffix("_date_time").and_then(|n| n.parse().ok()) {
            dates.insert(num, value.as_str().unwrap_or("").to_owned());
        } else if let (Ok(num), Some(turns)) = (n.parse::<u64>(), value.as_array()) {
            for t in turns {
                if let Some(id) = t["dia_id"].as_str() {
                    turns_of.entry(num).or_default().insert(id.to_owned());
                    let text = t["text"].as_str().unwrap_or("");
                    let caption = t["blip_caption"].as_str().map(|c| format!(" [shares a photo: {c}]")).unwrap_or_default();
                    turn_text.insert(id.to_owned(), format!("{text}{caption}"));
                }
            }
        }
    }
    let all_turns: HashSet<&String> = turns_of.values().flatten().collect();
    let mut observations = Vec::new();
    if let Some(obs) = sample["observation"].as_object() {
        for (key, per_speaker) in obs {
            let Some(num) = session_number(key) else { continue };
            let date = dates.get(&num).cloned().unwrap_or_default();
            for (speaker, facts) in per_speaker.as_object().into_iter().flatten() {
                for (i, fact) in facts.as_array().into_iter().flatten().enumerate() {
                    let text = fact[0].as_str().unwrap_or("").to_owned();
                    let ids: HashSet<String> = ids_in(re, &fact[1]).into_iter().collect();
                    let quotes: Vec<String> = ids.iter().filter_map(|i| turn_text.get(i)).map(|t| format!("> {t}")).collect();
                    let body = match std::env::var("OBS_BODY").as_deref() {
                        Ok("quote") => format!("{text}\n\n{}", quotes.join("\n")),
                        Ok("both") => format!("{text}\n\nSaid by {speaker} on {date}.\n{}", quotes.join("\n")),
                        Ok("plain") => text.clone(),
                        _ => format!("{text}\n\nSaid by {speaker} on {date}."),
                    };
                    observations.push(Unit {
                        rel: format!("session-{num:02}/{}-{i:03}.md", speaker.to_lowercase()),
                        name: format!("{speaker}, session {num}"),
                        description: text.clone(),
                        body,
                        ids,
                    });
                }
            }
        }
    }
    let mut summaries = Vec::new();
    if let Some(sums) = sample["session_summary"].as_object() {
        for (key, text) in sums {
            let Some(num) = session_number(key) else { continue };
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
        let evidence: HashSet<String> = raw.iter().filter(|e| all_turns.contains(e)).cloned().collect();
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
    Ok(Conversation { id, observations, summaries, questions })
}

fn session_number(key: &str) -> Option<u64> {
    key.strip_prefix("session_")?.split('_').next()?.parse().ok()
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

fn header(u: &Unit, i: usize) -> MemoryHeader {
    MemoryHeader {
        rel_path: u.rel.clone(),
        name: Some(u.name.clone()),
        description: Some(u.description.clone()),
        memory_type: Some(MemoryType::Project),
        mtime: UNIX_EPOCH + Duration::from_secs(1_700_000_000 + i as u64),
    }
}

/// Evaluate one selector kind over one level of one conversation.
async fn evaluate(kind: &str, params: Bm25Params, units: &[&Unit], keep: fn(&str) -> bool, conv: &Conversation, tally: &mut Tally) -> Result<()> {
    let mut headers: Vec<MemoryHeader> = units.iter().enumerate().map(|(i, u)| header(u, i)).collect();
    headers.reverse();
    let by_path: HashMap<&str, &Unit> = units.iter().map(|u| (u.rel.as_str(), *u)).collect();
    let ctx = SelectionContext::with_limit(10);
    let started = Instant::now();
    let mut index = Bm25Index::new(params);
    if kind != "keyword" {
        for (u, h) in units.iter().zip(headers.iter().rev()) {
            index.upsert(&u.rel, h.mtime, IndexText { name: &u.name, description: &u.description, body: &u.body });
        }
    }
    tally.build += started.elapsed();
    tally.memories += units.iter().filter(|u| keep(&u.rel)).count();
    let keyword: Arc<dyn Selector> = Arc::new(KeywordSelector::default());
    for q in &conv.questions {
        let t = Instant::now();
        let chosen: Vec<String> = if kind == "keyword" {
            keyword.select_checked(&q.text, &headers, &ctx).await?
        } else {
            index.search(&q.text, 10, keep).into_iter().map(|(p, _)| p).collect()
        };
        tally.latencies.push(t.elapsed());
        let covered = |k: usize| -> HashSet<&String> {
            chosen.iter().take(k).filter_map(|p| by_path.get(p.as_str())).flat_map(|u| u.ids.iter()).collect()
        };
        tally.add(q, &covered(5), &covered(10));
        if std::env::var("DEBUG_MISS").is_ok() && kind == "bm25" && q.evidence.iter().all(|e| !covered(5).contains(e)) {
            let ev: Vec<&&Unit> = units.iter().filter(|u| u.ids.iter().any(|i| q.evidence.contains(i))).collect();
            eprintln!("MISS [{}] {}\n  want: {:?}\n  got: {:?}", q.category, q.text, ev.iter().map(|u| &u.description).collect::<Vec<_>>(), chosen.iter().take(3).filter_map(|p| by_path.get(p.as_str())).map(|u| &u.description).collect::<Vec<_>>());
        }
    }
    Ok(())
}

fn any(_: &str) -> bool {
    true
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
        let (k, v) = kv.split_once('=').context("--bm25 expects key=value pairs")?;
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

            other => bail!("unknown --bm25 key `{other}`"),
        }
    }
    Ok(p)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        bail!("usage: locomo_recall <path to locomo10.json> [--bm25 k1=1.2,b=0.75,desc=2,...]");
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
    let flat = Bm25Params { dir_weight: 0.0, ..params };
    let lifted = Bm25Params { dir_weight: if params.dir_weight > 0.0 { params.dir_weight } else { 0.3 }, ..params };
    let runs: Vec<(&str, &str, Bm25Params)> = vec![
        ("keyword", "observation", flat),
        ("bm25", "observation", flat),
        ("bm25+lift", "observation", lifted),
        ("keyword", "summary", flat),
        ("bm25", "summary", flat),
        ("bm25+lift", "summary", lifted),
        ("bm25", "combined", flat),
        ("bm25+lift", "combined", lifted),
    ];
    let questions: usize = convs.iter().map(|c| c.questions.len()).sum();
    println!("LoCoMo: {} conversations, {questions} questions with evidence ({} skipped without evidence, {} evidence ids dropped: no such turn)\n", convs.len(), stats.skipped_no_evidence, stats.dropped_bad_ids);
    print!("| selector | level | memories/conv |");
    for (_, name) in CATEGORIES {
        print!(" {name} R@5/R@10 |");
    }
    println!(" overall R@5 | overall R@10 | p50 | p99 | index build/conv |");
    println!("|{}", "---|".repeat(11));
    for (kind, level, p) in runs {
        let mut tally = Tally::default();
        for conv in &convs {
            let lift = kind.ends_with("lift");
            let (units, keep): (Vec<&Unit>, fn(&str) -> bool) = match level {
                "observation" if lift => (conv.observations.iter().chain(&conv.summaries).collect(), is_observation),
                "observation" => (conv.observations.iter().collect(), any),
                "summary" if lift => (conv.observations.iter().chain(&conv.summaries).collect(), is_summary),
                "summary" => (conv.summaries.iter().collect(), any),
                _ => (conv.observations.iter().chain(&conv.summaries).collect(), any),
            };
            evaluate(kind, p, &units, keep, conv, &mut tally).await?;
            let _ = &conv.id;
        }
        print!("| {kind} | {level} | {} |", tally.memories / convs.len().max(1));
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
    let _ = SystemTime::now();
    Ok(())
}
