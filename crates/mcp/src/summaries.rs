//! The background summariser: after a save returns, a model writes the entry's one-line abstract
//! (L0, the frontmatter `description`) and its short overview (L1, see [`crate::tiers`]).
//!
//! Each entry is tried on the configured model, then on the fallback endpoint; when both fail,
//! the round is retried after each of [`SummaryConfig::retry_delays`] (growing waits); when every
//! round failed, the entry keeps its raw text alone (its pending mark is removed). An answer that
//! is not the asked-for JSON, has an empty field, is in another script than the entry, or holds
//! a credential counts as a failure: nothing a model writes reaches the store unchecked, and the
//! write itself goes through [`MemoryStore::write`] (secret filter included).
//!
//! Pending work survives a restart: the entry carries a pending mark in its body, and the store's
//! [`LocalPurpose::PendingWork`] dir holds one small file per waiting entry
//! (`.memloop-summaries/`); a server resumes a store's waiting entries when it first opens it
//! (at start for the projects under its roots and the global memory).
//!
//! The queue is bounded ([`SummaryConfig::queue_capacity`]): a save never waits for it. An entry
//! that does not fit stays marked on disk and is picked up when the worker runs dry.

use crate::tiers::{self, SummaryState};
use memloop_core::model::{JsonSchema, Model, ModelRequest};
use memloop_core::{CancellationToken, message::Message};
use memloop_secrets::SecretFilter;
use memloop_store::{LocalPurpose, MemoryDoc, MemoryError, MemoryFile, MemoryStore, WriteMode};
use memloop_text::truncate_utf8;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The name of the pending-work dir inside [`LocalPurpose::PendingWork`].
const QUEUE_DIR: &str = ".memloop-summaries";
/// The longest abstract kept (characters), as long as a description written on save.
const L0_MAX_CHARS: usize = 150;
/// The longest overview kept (bytes).
const OVERVIEW_MAX_BYTES: usize = 1500;
/// How much of an entry the model is shown (bytes).
const PROMPT_MAX_BYTES: usize = 16 * 1024;
/// `ModelRequest::purpose` of summary requests.
pub const SUMMARY_PURPOSE: &str = "memory_summary";

const SYSTEM_PROMPT: &str = "You summarise one entry of a software project's memory. Answer \
with a JSON object {\"abstract\": ..., \"overview\": ...}: `abstract` is one line of at most 150 \
characters saying what the entry is about; `overview` is two to four sentences with the facts a \
reader needs to decide whether to open the entry. Write both in the language the entry is written \
in. Never copy credentials, keys or passwords.";

/// Which models write the summaries and how hard the server tries. Off (the default) when
/// neither [`model`](Self::model) nor [`fallback`](Self::fallback) is set: entries are stored as
/// written and L1 is the text cut at 1 KiB.
#[derive(Clone)]
pub struct SummaryConfig {
    /// The configured provider, tried first.
    pub model: Option<Arc<dyn Model>>,
    /// Tried when [`model`](Self::model) fails (e.g. a local llama.cpp or Ollama endpoint).
    pub fallback: Option<Arc<dyn Model>>,
    /// After both failed: wait this long and try both again, once per delay (default 15 s,
    /// 1 min, 4 min: three retries with growing waits). Then the raw text alone is kept.
    pub retry_delays: Vec<Duration>,
    /// The longest one model call may take (default 2 min); `None` leaves it to the provider's
    /// own timeout.
    pub call_timeout: Option<Duration>,
    /// Most entries waiting in memory (default 256); more stay marked on disk until the worker
    /// runs dry.
    pub queue_capacity: usize,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        Self {
            model: None,
            fallback: None,
            retry_delays: vec![
                Duration::from_secs(15),
                Duration::from_secs(60),
                Duration::from_secs(240),
            ],
            call_timeout: Some(Duration::from_secs(120)),
            queue_capacity: 256,
        }
    }
}

impl SummaryConfig {
    /// Whether any model is configured.
    pub fn enabled(&self) -> bool {
        self.model.is_some() || self.fallback.is_some()
    }

    fn chain(&self) -> Vec<Arc<dyn Model>> {
        self.model.iter().chain(&self.fallback).cloned().collect()
    }
}

impl std::fmt::Debug for SummaryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummaryConfig")
            .field("model", &self.model.as_ref().map(|m| m.name().to_owned()))
            .field(
                "fallback",
                &self.fallback.as_ref().map(|m| m.name().to_owned()),
            )
            .field("retry_delays", &self.retry_delays)
            .field("call_timeout", &self.call_timeout)
            .field("queue_capacity", &self.queue_capacity)
            .finish()
    }
}

/// One entry to summarise.
struct Job {
    store: Arc<dyn MemoryStore>,
    rel: String,
}

/// State shared by the handle and the worker.
struct Shared {
    /// Entries queued or being written (plus a start-up scan while it runs).
    outstanding: watch::Sender<usize>,
    /// Stores with entries that did not fit the queue.
    overflow: Mutex<Vec<Arc<dyn MemoryStore>>>,
}

impl Shared {
    fn add(&self, n: usize) {
        self.outstanding.send_modify(|c| *c += n);
    }

    fn done(&self) {
        self.outstanding.send_modify(|c| *c = c.saturating_sub(1));
    }
}

/// The running summariser: a bounded queue and one worker task (stopped when this is dropped).
pub(crate) struct Summariser {
    tx: mpsc::Sender<Job>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Summariser {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Summariser {
    /// Start the worker for `config`; `None` when summaries are off or there is no tokio
    /// runtime to run it on.
    pub(crate) fn start(config: &SummaryConfig) -> Option<Self> {
        if !config.enabled() {
            return None;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no tokio runtime: background summaries are off");
            return None;
        };
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let shared = Arc::new(Shared {
            outstanding: watch::channel(0).0,
            overflow: Mutex::new(Vec::new()),
        });
        let worker = Worker {
            chain: config.chain(),
            retry_delays: config.retry_delays.clone(),
            call_timeout: config.call_timeout,
            shared: shared.clone(),
        };
        let task = runtime.spawn(worker.run(rx));
        Some(Self { tx, shared, task })
    }

    /// Queue `rel` (just written with a pending mark) in `store`: recorded on disk first, so a
    /// restart finds it; never waits.
    pub(crate) fn enqueue(&self, store: &Arc<dyn MemoryStore>, rel: &str) {
        if let Err(e) = record(store.as_ref(), rel) {
            tracing::warn!(error = %e, rel, "pending summary not recorded on disk");
        }
        self.push(store, rel);
    }

    fn push(&self, store: &Arc<dyn MemoryStore>, rel: &str) {
        self.shared.add(1);
        let job = Job {
            store: store.clone(),
            rel: rel.to_owned(),
        };
        if let Err(e) = self.tx.try_send(job) {
            self.shared.done();
            let store = match e {
                mpsc::error::TrySendError::Full(j) | mpsc::error::TrySendError::Closed(j) => {
                    j.store
                }
            };
            tracing::info!(rel, "summary queue full: the entry waits on disk");
            let mut overflow = self
                .shared
                .overflow
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if !overflow.iter().any(|s| Arc::ptr_eq(s, &store)) {
                overflow.push(store);
            }
        }
    }

    /// Queue every entry `store` has recorded as waiting (a store opened for the first time).
    pub(crate) fn resume(&self, store: &Arc<dyn MemoryStore>) {
        for rel in recorded(store.as_ref()) {
            tracing::info!(rel, "resuming a pending summary");
            self.push(store, &rel);
        }
    }

    /// Count a start-up scan as outstanding work until the returned guard is dropped.
    pub(crate) fn scanning(&self) -> ScanGuard {
        self.shared.add(1);
        ScanGuard(self.shared.clone())
    }

    /// Wait until nothing is queued or being written.
    pub(crate) async fn settled(&self) {
        let mut rx = self.shared.outstanding.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

/// Keeps [`Summariser::settled`] waiting while a start-up scan runs.
pub(crate) struct ScanGuard(Arc<Shared>);

impl Drop for ScanGuard {
    fn drop(&mut self) {
        self.0.done();
    }
}

/// The queue dir of `store` (in its pending-work dir), when it is a real directory: created
/// when `create`, and never taken through a link (someone who can write the memory dir could
/// plant one to lead the queue's writes and deletions elsewhere).
fn queue_dir(store: &dyn MemoryStore, create: bool) -> std::io::Result<PathBuf> {
    let base = store.local_dir_or_temp(LocalPurpose::PendingWork);
    if create {
        return memloop_files::internal_dir(&base, QUEUE_DIR);
    }
    memloop_files::existing_internal_dir(&base, QUEUE_DIR)?.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no `{QUEUE_DIR}` yet"),
        )
    })
}

/// The file that records `rel` as waiting (its name in the queue dir).
fn queue_file(rel: &str) -> String {
    let digest = Sha256::digest(rel.as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("{hex}.pending")
}

/// Record `rel` as waiting (atomically: a temp file renamed into place).
fn record(store: &dyn MemoryStore, rel: &str) -> std::io::Result<()> {
    let dir = queue_dir(store, true)?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
    std::io::Write::write_all(&mut tmp, rel.as_bytes())?;
    tmp.persist(dir.join(queue_file(rel)))
        .map_err(|e| e.error)?;
    Ok(())
}

/// Forget `rel` as waiting.
fn forget(store: &dyn MemoryStore, rel: &str) {
    let file = match queue_dir(store, false) {
        Ok(dir) => dir.join(queue_file(rel)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            tracing::warn!(error = %e, "pending record not removed");
            return;
        }
    };
    // Removing a link removes the link, never what it points at.
    match std::fs::remove_file(&file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(error = %e, file = %file.display(), "pending record not removed"),
    }
}

/// The entries `store` has recorded as waiting (nothing, and nothing created, when none): the
/// regular `*.pending` files of the queue dir, read without following links.
fn recorded(store: &dyn MemoryStore) -> Vec<String> {
    let dir = match queue_dir(store, false) {
        Ok(dir) => dir,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(error = %e, "pending summaries not resumed");
            }
            return Vec::new();
        }
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|name| name.ends_with(".pending"))
        .filter_map(|name| memloop_files::read_internal_file(&dir, &name).ok())
        .filter_map(|bytes| String::from_utf8(bytes).ok())
        .filter(|rel| !rel.trim().is_empty())
        .collect();
    out.sort();
    out
}

/// A model's summary of one entry, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Summary {
    abstract_line: String,
    overview: String,
}

struct Worker {
    chain: Vec<Arc<dyn Model>>,
    retry_delays: Vec<Duration>,
    call_timeout: Option<Duration>,
    shared: Arc<Shared>,
}

impl Worker {
    async fn run(self, mut rx: mpsc::Receiver<Job>) {
        while let Some(job) = rx.recv().await {
            self.process(&job).await;
            if rx.is_empty() {
                self.drain_overflow().await;
            }
            self.shared.done();
        }
    }

    /// Summarise the entries that did not fit the queue, in place.
    async fn drain_overflow(&self) {
        loop {
            let stores = std::mem::take(
                &mut *self
                    .shared
                    .overflow
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            if stores.is_empty() {
                return;
            }
            for store in stores {
                for rel in recorded(store.as_ref()) {
                    self.process(&Job {
                        store: store.clone(),
                        rel,
                    })
                    .await;
                }
            }
        }
    }

    async fn process(&self, job: &Job) {
        let store = job.store.as_ref();
        let file = match store.read(&job.rel).await {
            Ok(f) => f,
            Err(MemoryError::NotFound(_)) => {
                forget(store, &job.rel);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, rel = job.rel, "entry unreadable; its summary waits");
                return;
            }
        };
        let tiered = tiers::split(&file.body);
        if tiered.state != SummaryState::Pending {
            forget(store, &job.rel);
            return;
        }
        let summary = self.summarise(&file, &tiered.full).await;
        // The entry may have changed while the model worked: a newer save owns it then.
        match store.read(&job.rel).await {
            Ok(now) => {
                let t = tiers::split(&now.body);
                if t.state != SummaryState::Pending || t.full != tiered.full {
                    tracing::debug!(rel = job.rel, "entry changed meanwhile; summary dropped");
                    return;
                }
            }
            Err(_) => return,
        }
        let h = &file.header;
        let name = h.name.clone().unwrap_or_else(|| job.rel.clone());
        let doc = match &summary {
            Some(s) => MemoryDoc::new(
                name,
                s.abstract_line.clone(),
                h.memory_type,
                tiers::with_overview(&tiered.full, &s.overview),
            ),
            None => MemoryDoc::new(
                name,
                h.description.clone().unwrap_or_default(),
                h.memory_type,
                tiered.full.clone(),
            ),
        };
        match store.write(&job.rel, &doc, WriteMode::Overwrite).await {
            Ok(_) => {
                forget(store, &job.rel);
                tracing::info!(
                    rel = job.rel,
                    summarised = summary.is_some(),
                    "background summary done"
                );
            }
            Err(e) => tracing::warn!(error = %e, rel = job.rel, "summary not written"),
        }
    }

    /// Every model in turn, then again after each retry delay; `None` when all failed.
    async fn summarise(&self, file: &MemoryFile, full: &str) -> Option<Summary> {
        for round in 0..=self.retry_delays.len() {
            if round > 0 {
                tokio::time::sleep(self.retry_delays[round - 1]).await;
            }
            for model in &self.chain {
                match self.ask(model.as_ref(), file, full).await {
                    Ok(s) => return Some(s),
                    Err(why) => tracing::warn!(
                        model = model.name(),
                        round,
                        rel = file.header.rel_path,
                        %why,
                        "summary attempt failed"
                    ),
                }
            }
        }
        tracing::warn!(
            rel = file.header.rel_path,
            "every summary attempt failed; keeping the raw text alone"
        );
        None
    }

    async fn ask(
        &self,
        model: &dyn Model,
        file: &MemoryFile,
        full: &str,
    ) -> Result<Summary, String> {
        let title = file.header.name.as_deref().unwrap_or(&file.header.rel_path);
        let mut req = ModelRequest::new(
            SUMMARY_PURPOSE,
            vec![Message::user(format!(
                "Title: {title}\n\n{}",
                truncate_utf8(full, PROMPT_MAX_BYTES)
            ))],
        );
        req.system = vec![SYSTEM_PROMPT.to_owned()];
        req.max_tokens = 512;
        req.temperature = Some(0.2);
        req.response_schema = Some(summary_schema());
        let call = model.complete(req, CancellationToken::new());
        let response = match self.call_timeout {
            Some(t) => tokio::time::timeout(t, call)
                .await
                .map_err(|_| format!("no answer within {t:?}"))?,
            None => call.await,
        }
        .map_err(|e| e.to_string())?;
        check(&response.text_content(), full)
    }
}

/// The structured-output schema `{"abstract": string, "overview": string}`.
fn summary_schema() -> JsonSchema {
    JsonSchema {
        name: "memory_summary".into(),
        schema: serde_json::json!({
            "type": "object",
            "properties": {
                "abstract": { "type": "string" },
                "overview": { "type": "string" }
            },
            "required": ["abstract", "overview"],
            "additionalProperties": false
        }),
    }
}

/// The first JSON object in `text` (bare, fenced or wrapped in prose) with both fields.
fn parse(text: &str) -> Option<(String, String)> {
    for (i, _) in text.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(v)) = stream.next()
            && let (Some(a), Some(o)) = (v["abstract"].as_str(), v["overview"].as_str())
        {
            return Some((a.to_owned(), o.to_owned()));
        }
    }
    None
}

/// The model's answer as a [`Summary`], or why it is unusable.
fn check(answer: &str, entry: &str) -> Result<Summary, String> {
    let (a, o) = parse(answer).ok_or_else(|| {
        format!(
            "the answer is not the asked-for JSON: {:?}",
            truncate_utf8(answer, 120)
        )
    })?;
    let abstract_line: String = memloop_text::one_line(&a)
        .chars()
        .take(L0_MAX_CHARS)
        .collect();
    let overview = tiers::clean_overview(&o, OVERVIEW_MAX_BYTES);
    if abstract_line.is_empty() || overview.is_empty() {
        return Err("the abstract or the overview is empty".into());
    }
    for part in [&abstract_line, &overview] {
        if SecretFilter::check(part).is_err() {
            return Err("the summary holds credential-shaped text; refused".into());
        }
    }
    let wanted = scripts(entry);
    if !wanted.is_empty() {
        let got = scripts(&format!("{abstract_line} {overview}"));
        if !wanted.iter().any(|s| got.contains(s)) {
            return Err(format!(
                "the summary is not in the entry's script ({})",
                wanted.join(", ")
            ));
        }
    }
    Ok(Summary {
        abstract_line,
        overview,
    })
}

/// The non-Latin scripts that make up at least a fifth of `text`'s letters (empty for text
/// mostly in Latin script, which needs no check).
fn scripts(text: &str) -> Vec<&'static str> {
    let mut counts: [(&'static str, usize); 5] = [
        ("Han", 0),
        ("Kana", 0),
        ("Hangul", 0),
        ("Cyrillic", 0),
        ("other", 0),
    ];
    let mut letters = 0usize;
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        let slot = match c as u32 {
            0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF => 0,
            0x3040..=0x30FF | 0x31F0..=0x31FF => 1,
            0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF => 2,
            0x0400..=0x052F => 3,
            _ => 4,
        };
        counts[slot].1 += 1;
    }
    counts[..4]
        .iter()
        .filter(|(_, n)| *n > 0 && *n * 5 >= letters)
        .map(|(s, _)| *s)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_queue_dir_that_is_a_link_is_never_written_read_or_emptied_through() {
        let tmp = tempfile::tempdir().unwrap();
        let store = memloop_files::FileMemoryStore::open(tmp.path().join("memory")).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        let planted = victim.join(queue_file("决定/数据库.md"));
        std::fs::write(&planted, "决定/数据库.md").unwrap();
        std::os::unix::fs::symlink(&victim, tmp.path().join("memory").join(QUEUE_DIR)).unwrap();
        assert!(record(&store, "заметки/план.md").is_err());
        assert!(recorded(&store).is_empty(), "read through a link");
        forget(&store, "决定/数据库.md");
        assert!(planted.exists(), "deleted through a link");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
        // A real queue dir works, and a pending record that is a link is not read.
        std::fs::remove_file(tmp.path().join("memory").join(QUEUE_DIR)).unwrap();
        record(&store, "заметки/план.md").unwrap();
        let dir = queue_dir(&store, false).unwrap();
        std::os::unix::fs::symlink(&planted, dir.join("linked.pending")).unwrap();
        assert_eq!(recorded(&store), vec!["заметки/план.md".to_owned()]);
        forget(&store, "заметки/план.md");
        assert!(recorded(&store).is_empty());
    }

    #[test]
    fn answers_are_checked() {
        let ok = check(
            "Sure:\n```json\n{\"abstract\": \"Use  Postgres\\n16\", \"overview\": \"Chosen for JSONB.\"}\n```",
            "We decided to use Postgres 16.",
        )
        .unwrap();
        assert_eq!(ok.abstract_line, "Use Postgres 16");
        assert_eq!(ok.overview, "Chosen for JSONB.");
        for bad in [
            "",
            "I think this entry is about databases.",
            "{\"abstract\": \"\", \"overview\": \"x\"}",
            "{\"abstract\": \"x\", \"overview\": \"  \"}",
            "{\"abstract\": 3, \"overview\": \"x\"}",
        ] {
            assert!(check(bad, "text").is_err(), "{bad:?} accepted");
        }
        let leaked = "{\"abstract\": \"key AKIAIOSFODNN7EXAMPLE\", \"overview\": \"x\"}";
        assert!(check(leaked, "text").unwrap_err().contains("credential"));
    }

    #[test]
    fn the_summary_must_share_the_entrys_script() {
        let zh = "我们决定使用 PostgreSQL 16，因为需要 JSONB 支持和逻辑复制。";
        let en = "{\"abstract\": \"Use PostgreSQL\", \"overview\": \"For JSONB.\"}";
        assert!(check(en, zh).unwrap_err().contains("Han"));
        let zh_answer = "{\"abstract\": \"使用 PostgreSQL 16\", \"overview\": \"因为 JSONB。\"}";
        assert_eq!(
            check(zh_answer, zh).unwrap().abstract_line,
            "使用 PostgreSQL 16"
        );
        let ja = "データベースは PostgreSQL にします。理由は JSONB です。";
        assert!(scripts(ja).contains(&"Kana"));
        assert_eq!(scripts("Решили использовать PostgreSQL"), vec!["Cyrillic"]);
        assert!(scripts("plain English text").is_empty());
    }
}
