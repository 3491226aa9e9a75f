//! [`RecallHook`]: the recall pipeline as a turn-start hook: once per user turn, in the
//! background, select memories relevant to the message and surface them within per-turn and
//! per-session caps.

use super::reads::{ReadTools, read_in_full};
use super::selector::{SelectionContext, Selector};
use super::surface::{Clock, SystemClock, age_days, render_surfaced, surfaced_in};
use crate::events::RecallEvent;
use memloop_core::Hook;
use memloop_core::{
    HookContext,
    hooks::{Attachment, PendingAttachment},
    message::{ContentBlock, Message},
};
use memloop_store::MemoryStore;
use memloop_store::{Headers, ScanCache};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The attachment kind recall produces.
pub const RECALL_ATTACHMENT_KIND: &str = "relevant_memories";

/// Every number of the recall pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallConfig {
    /// Run recall at all. Default true.
    pub enabled: bool,
    /// Files surfaced per turn (the selector's limit). Default 5.
    pub max_files: usize,
    /// Lines per surfaced file. Default 200.
    pub max_lines: usize,
    /// Bytes per surfaced file. Default 4,096.
    pub max_bytes: usize,
    /// Bytes surfaced per session (until compaction). Default 60,000.
    pub session_budget_bytes: usize,
    /// Skip a message that is a single word (`ok`, `thanks`, `谢谢`, `继续`). Words are counted
    /// per script: a run of Chinese or Japanese characters (written without spaces) counts one
    /// word per two characters (Thai: per six), so `集成测试应该怎么写？` is a question, not a word.
    /// Default true.
    pub skip_single_word: bool,
    /// Tools whose successful whole-file reads mean "already read".
    pub read_tools: ReadTools,
}

impl Default for RecallConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_files: 5,
            max_lines: 200,
            max_bytes: 4_096,
            session_budget_bytes: 60_000,
            skip_single_word: true,
            read_tools: ReadTools::default(),
        }
    }
}

impl RecallConfig {
    /// The defaults, with recall off when `MEMLOOP_DISABLE_AUTO_MEMORY` or `MEMLOOP_SIMPLE` is truthy in `env`.
    ///
    /// ```
    /// use memloop_host::env::EnvVars;
    /// use memloop_recall::RecallConfig;
    /// let env = EnvVars::from_pairs([("MEMLOOP_DISABLE_AUTO_MEMORY", "yes")]);
    /// assert!(!RecallConfig::from_env(&env).enabled);
    /// assert!(RecallConfig::from_env(&EnvVars::from_pairs::<&str, &str>([])).enabled);
    /// ```
    pub fn from_env(env: &memloop_host::env::EnvVars) -> Self {
        Self {
            enabled: memloop_paths::env::memory_enabled(env),
            ..Self::default()
        }
    }
}

/// A surfacing not yet seen in the conversation: it is rolled back at the next turn if the agent
/// dropped it (the turn ended before the prefetch settled).
#[derive(Debug)]
struct Provisional {
    paths: Vec<String>,
    bytes: usize,
    rendered: String,
}

#[derive(Debug, Default)]
struct State {
    surfaced: HashSet<String>,
    spent: usize,
    exhausted: bool,
    provisional: Vec<Provisional>,
    /// Bumped by every reset (compaction): a job started before it must not commit.
    generation: u64,
    /// The conversation the hook first saw was read for earlier surfacings (a resumed session).
    seeded: bool,
}

impl State {
    /// Count what the recall attachments already in `messages` surfaced (an agent started from
    /// an earlier history, or a transcript): their paths join the surfaced set and their bytes
    /// the spent budget. Paths that name no memory of `store` are ignored.
    fn seed(&mut self, messages: &[Message], store: &dyn MemoryStore) {
        if std::mem::replace(&mut self.seeded, true) {
            return;
        }
        for text in messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(ContentBlock::as_text)
        {
            let Some((shown, bytes)) = surfaced_in(text) else {
                continue;
            };
            let paths: Vec<String> = shown
                .iter()
                .filter_map(|p| store.memory_path_of(std::path::Path::new(p)).ok())
                .map(|p| p.as_str().to_owned())
                .collect();
            if paths.is_empty() {
                continue;
            }
            self.spent += bytes;
            self.surfaced.extend(paths);
        }
        if self.spent > 0 {
            tracing::debug!(
                surfaced = self.surfaced.len(),
                bytes = self.spent,
                "recall state rebuilt from the conversation"
            );
        }
    }

    /// Confirm surfacings that made it into the conversation; roll back the others.
    fn reconcile(&mut self, messages: &[Message]) {
        for p in std::mem::take(&mut self.provisional) {
            let landed = messages.iter().any(|m| {
                m.content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::Text { text } if *text == p.rendered))
            });
            if !landed {
                tracing::debug!(paths = ?p.paths, "recall attachment was dropped; rolled back");
                for path in &p.paths {
                    self.surfaced.remove(path);
                }
                self.spent = self.spent.saturating_sub(p.bytes);
                self.exhausted = false;
            }
        }
    }
}

/// Recall as a [`Hook`](memloop_core::Hook): it starts at turn start; on compaction and on
/// `Agent::clear` the surfaced set and the byte budget reset. On an agent started from an earlier
/// conversation (`AgentBuilder::messages`, e.g. a transcript's), the first turn rebuilds both
/// from the recall attachments in it, so a resumed session neither surfaces a memory again nor
/// gets a fresh budget.
///
/// Per user turn it returns at once with a [`PendingAttachment`]; in the background it scans the
/// store, asks the selector (errors count as "nothing selected"), reads and renders the chosen
/// files, and yields a `relevant_memories` attachment. It emits [`RecallEvent::MemoriesSurfaced`]
/// or [`RecallEvent::RecallSkipped`].
pub struct RecallHook {
    store: Arc<dyn MemoryStore>,
    /// The store's headers, kept current through its change feed.
    headers: Arc<ScanCache>,
    /// The daily logs among them (never surfaced), for one version of the headers.
    logs: Arc<Mutex<(u64, Arc<HashSet<String>>)>>,
    selector: Arc<dyn Selector>,
    config: RecallConfig,
    clock: Arc<dyn Clock>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for RecallHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallHook")
            .field("store", &self.store.describe().to_string())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RecallHook {
    /// Recall over `store` with `selector` and the default config. When the selector follows
    /// the same store through a header cache ([`Selector::header_cache`]: BM25, hybrid), the
    /// hook refreshes that cache, so a turn asks the store once what changed.
    pub fn new(store: Arc<dyn MemoryStore>, selector: Arc<dyn Selector>) -> Self {
        let headers = selector
            .header_cache()
            .filter(|c| std::ptr::addr_eq(Arc::as_ptr(c.store()), Arc::as_ptr(&store)))
            .unwrap_or_else(|| Arc::new(ScanCache::new(store.clone())));
        Self {
            headers,
            logs: Arc::default(),
            store,
            selector,
            config: RecallConfig::default(),
            clock: Arc::new(SystemClock),
            state: Arc::default(),
        }
    }

    /// Replace the config (builder style).
    pub fn with_config(mut self, config: RecallConfig) -> Self {
        self.config = config;
        self
    }

    /// Replace the clock (builder style; tests use [`super::ManualClock`]).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Paths surfaced this session (since the last compaction).
    pub fn surfaced(&self) -> HashSet<String> {
        self.lock(|s| s.surfaced.clone())
    }

    /// Bytes surfaced this session (since the last compaction).
    pub fn spent_bytes(&self) -> usize {
        self.lock(|s| s.spent)
    }

    /// Forget what was surfaced and refill the budget (what compaction and `Agent::clear` do).
    /// A recall job still running from before the reset attaches nothing.
    pub fn reset(&self) {
        self.lock(|s| {
            *s = State {
                generation: s.generation.wrapping_add(1),
                seeded: true,
                ..State::default()
            }
        });
    }

    fn lock<T: Default>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        self.state.lock().map(|mut s| f(&mut s)).unwrap_or_default()
    }

    fn skip_reason(&self, user_text: &str) -> Option<&'static str> {
        let words = message_words(user_text);
        if words == 0 {
            return Some("empty message");
        }
        if self.config.skip_single_word && words == 1 {
            return Some("single-word message");
        }
        if self.lock(|s| s.exhausted || s.spent >= self.config.session_budget_bytes) {
            return Some("session recall budget spent");
        }
        None
    }
}

/// About how many words `text` holds: whitespace-separated pieces, where a piece holding runs of
/// Chinese, Japanese or Thai (scripts written without spaces) counts one word per two characters
/// of each Chinese or Japanese run and per six of each Thai run (at least one), plus one per
/// other token in it.
fn message_words(text: &str) -> usize {
    text.split_whitespace()
        .map(|piece| {
            let runs = memloop_text::tokens(piece);
            if !runs.iter().any(|(_, script)| {
                matches!(
                    script,
                    memloop_text::Script::Cjk | memloop_text::Script::Thai
                )
            }) {
                return 1;
            }
            runs.iter()
                .map(|(run, script)| match script {
                    memloop_text::Script::Cjk => run.chars().count().div_ceil(2),
                    // Thai words are longer, and vowel and tone marks are characters too.
                    memloop_text::Script::Thai => run.chars().count().div_ceil(6),
                    _ => 1,
                })
                .sum()
        })
        .sum()
}

#[async_trait::async_trait]
impl Hook for RecallHook {
    async fn on_turn_start(&self, ctx: &HookContext, user_text: &str) -> Option<PendingAttachment> {
        if !self.config.enabled {
            return None;
        }
        self.lock(|s| {
            s.seed(&ctx.messages, self.store.as_ref());
            s.reconcile(&ctx.messages);
        });
        if let Some(reason) = self.skip_reason(user_text) {
            ctx.emit(RecallEvent::RecallSkipped {
                reason: reason.into(),
            });
            return None;
        }
        let cancel = ctx.cancel.child_token();
        let generation = self.lock(|s| s.generation);
        let job = Job {
            store: self.store.clone(),
            headers: self.headers.clone(),
            logs: self.logs.clone(),
            selector: self.selector.clone(),
            config: self.config.clone(),
            clock: self.clock.clone(),
            state: self.state.clone(),
            query: user_text.to_owned(),
            ctx: ctx.clone(),
            cancel: cancel.clone(),
            generation,
        };
        let watch = cancel.clone();
        // Under the turn's span: what recall looked at and surfaced, or why it surfaced nothing
        // (paths and sizes only, never a memory's text).
        let span = tracing::info_span!(
            "recall",
            memloop.recall.selector = self.selector.name(),
            memloop.recall.degraded = tracing::field::Empty,
            memloop.recall.candidates = tracing::field::Empty,
            memloop.recall.surfaced = tracing::field::Empty,
            memloop.recall.bytes = tracing::field::Empty,
            memloop.recall.skipped = tracing::field::Empty,
        );
        Some(PendingAttachment::spawn(
            cancel,
            tracing::Instrument::instrument(
                async move {
                    tokio::select! {
                        biased;
                        _ = watch.cancelled() => None,
                        a = job.run() => a,
                    }
                },
                span,
            ),
        ))
    }
    async fn on_compacted(&self, _ctx: &HookContext) {
        self.reset();
    }

    async fn on_cleared(&self, _ctx: &HookContext) {
        self.reset();
    }
}

/// One turn's background recall.
struct Job {
    store: Arc<dyn MemoryStore>,
    headers: Arc<ScanCache>,
    logs: Arc<Mutex<(u64, Arc<HashSet<String>>)>>,
    selector: Arc<dyn Selector>,
    config: RecallConfig,
    clock: Arc<dyn Clock>,
    state: Arc<Mutex<State>>,
    query: String,
    ctx: HookContext,
    cancel: memloop_core::CancellationToken,
    /// The state's generation when the job started.
    generation: u64,
}

impl Job {
    /// Nothing to attach, and why; a job whose turn already ended tells nobody.
    fn skipped(&self, reason: impl Into<String>) -> Option<Attachment> {
        let reason = reason.into();
        tracing::Span::current().record("memloop.recall.skipped", reason.as_str());
        if !self.cancel.is_cancelled() {
            self.ctx.emit(RecallEvent::RecallSkipped { reason });
        }
        None
    }

    /// The daily logs among `headers`: found once per version of the headers, so a turn with
    /// no change does not look at every header.
    fn daily_logs(&self, headers: &Headers) -> Arc<HashSet<String>> {
        let Ok(mut cached) = self.logs.lock() else {
            return Arc::default();
        };
        if cached.0 != headers.version() || headers.version() == 0 {
            let logs = headers
                .iter()
                .filter(|h| memloop_store::is_daily_log(&h.rel_path))
                .map(|h| h.rel_path.clone())
                .collect();
            *cached = (headers.version(), Arc::new(logs));
        }
        cached.1.clone()
    }

    async fn run(self) -> Option<Attachment> {
        let headers = match self.headers.headers().await {
            Ok(h) => h,
            Err(e) => return self.skipped(format!("memory scan failed: {e}")),
        };
        // Daily logs are raw notes waiting for the dream, not memories to surface: they are
        // excluded like memories already surfaced.
        let logs = self.daily_logs(&headers);
        if headers.len() == logs.len() {
            return self.skipped("no memories");
        }
        tracing::Span::current().record(
            "memloop.recall.candidates",
            (headers.len() - logs.len()) as u64,
        );
        let mut exclude = read_in_full(
            &self.ctx.messages,
            self.store.as_ref(),
            &self.ctx.cwd,
            &self.config.read_tools,
            &|p: &str| headers.contains(p) && !logs.contains(p),
        );
        exclude.extend(logs.iter().cloned());
        exclude.extend(
            self.state
                .lock()
                .map(|s| s.surfaced.clone())
                .unwrap_or_default(),
        );
        let sel_ctx = SelectionContext {
            recent_tools: self.ctx.recent_tools.clone(),
            already_surfaced: exclude,
            limit: self.config.max_files,
            cancel: self.cancel.clone(),
            events: self.ctx.events.clone(),
        };
        let chosen = match self
            .selector
            .select_checked(&self.query, &*headers, &sel_ctx)
            .await
        {
            Ok(c) if c.is_empty() => return self.skipped("no relevant memories"),
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "memory selector failed; nothing surfaced");
                return self.skipped(format!("selector failed: {e}"));
            }
        };
        let blocks = self.render(&chosen, &headers).await;
        self.commit(blocks)
    }

    /// Read the chosen files concurrently and render them in the selector's order (unreadable
    /// ones are skipped).
    async fn render(&self, chosen: &[String], headers: &Headers) -> Vec<(String, String)> {
        let now = self.clock.now();
        let files = futures::future::join_all(chosen.iter().map(|rel| self.store.read(rel))).await;
        let mut out = Vec::new();
        for (rel, file) in chosen.iter().zip(files) {
            let file = match file {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(path = %rel, error = %e, "cannot read selected memory");
                    continue;
                }
            };
            let mtime = headers.get(rel).map_or(file.header.mtime, |h| h.mtime);
            let shown = memloop_store::MemoryPath::new(rel)
                .map(|p| self.store.target_path(&p))
                .unwrap_or_else(|_| PathBuf::from(rel));
            let text = render_surfaced(
                &shown.to_string_lossy(),
                &file.raw,
                age_days(now, mtime),
                self.config.max_lines,
                self.config.max_bytes,
            );
            out.push((rel.clone(), text));
        }
        out
    }

    /// Apply the session budget, record the surfacing, and build the attachment. A job whose
    /// attachment was dropped (the turn ended or was cancelled while it ran: a selector that
    /// blocks its thread cannot be stopped by the abort) records nothing and emits nothing; the
    /// check is made under the state lock, with the state change.
    fn commit(&self, blocks: Vec<(String, String)>) -> Option<Attachment> {
        let budget = self.config.session_budget_bytes;
        let mut state = self.state.lock().ok()?;
        if self.cancel.is_cancelled() {
            drop(state);
            tracing::debug!("recall finished after its turn; its result is dropped");
            tracing::Span::current().record("memloop.recall.skipped", "the turn ended first");
            return None;
        }
        if state.generation != self.generation {
            drop(state);
            tracing::debug!("recall finished after compaction; its result is dropped");
            return self.skipped("the conversation was compacted while recall ran");
        }
        let mut paths = Vec::new();
        let mut texts = Vec::new();
        let mut bytes = 0;
        for (rel, text) in blocks {
            if state.spent + bytes + text.len() > budget {
                state.exhausted = true;
                break;
            }
            bytes += text.len();
            paths.push(rel);
            texts.push(text);
        }
        if paths.is_empty() {
            drop(state);
            return self.skipped("session recall budget spent");
        }
        let att = Attachment {
            kind: RECALL_ATTACHMENT_KIND.into(),
            text: texts.join("\n\n"),
        };
        state.spent += bytes;
        state.surfaced.extend(paths.iter().cloned());
        state.provisional.push(Provisional {
            paths: paths.clone(),
            bytes,
            rendered: att.render(),
        });
        drop(state);
        tracing::info!(?paths, bytes, "memories surfaced");
        let span = tracing::Span::current();
        span.record("memloop.recall.surfaced", paths.join(", ").as_str());
        span.record("memloop.recall.bytes", bytes as u64);
        self.ctx
            .emit(RecallEvent::MemoriesSurfaced { paths, bytes });
        Some(att)
    }
}

#[cfg(test)]
mod tests {
    use super::message_words;

    #[test]
    fn words_are_counted_per_script() {
        for single in [
            "ok",
            "thanks!",
            "谢谢",
            "继续",
            "はい",
            "ขอบคุณ",
            "  Спасибо  ",
        ] {
            assert_eq!(message_words(single), 1, "{single}");
        }
        assert_eq!(message_words(""), 0);
        assert_eq!(message_words("how are you"), 3);
        // Questions written without spaces are questions.
        assert!(message_words("集成测试应该怎么写？") > 1);
        assert!(message_words("デプロイ手順を教えて") > 1);
        assert!(message_words("PostgreSQL数据库") > 1);
        assert_eq!(message_words("캐시는 어떻게 해요?"), 3);
        assert!(message_words("ใช้ฐานข้อมูลอะไรดีครับ") > 1);
    }
}
