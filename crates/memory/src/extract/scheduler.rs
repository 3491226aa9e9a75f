//! [`ExtractionScheduler`]: when to run the [`Extractor`]: after a main-agent turn, throttled,
//! at most one run per memory dir at a time, plus one trailing run.

use super::extractor::{ExtractError, ExtractionContext, Extractor};
use super::slot::{DirSlot, Pending, RunInfo, slot_for};
use crate::events::MemoryEvent;
use futures::FutureExt;
use memloop_core::Hook;
use memloop_core::{
    DrainReport, HookContext,
    hooks::{Attachment, PendingAttachment},
    message::{Message, MessageId, MessageKind},
};
use memloop_store::MemoryStore;
use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Settings of the [`ExtractionScheduler`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Run at all (off: the hook does nothing).
    pub enabled: bool,
    /// Run only every N eligible turns (default 1). Trailing runs ignore it.
    pub every_n_turns: u32,
    /// Timeout of [`ExtractionScheduler::drain_default`]. Default 60 s.
    pub drain_timeout: Duration,
    /// Besides the [`MemoryEvent::MemoriesSaved`] event, put a short `Memory saved: a.md, b.md`
    /// line in the conversation (a `memory_saved` system reminder on the next user message).
    /// Default off: Claude Code shows its notice to the user only (a display message that never
    /// reaches the model), and memloop's conversation is what the model reads; a host's UI shows
    /// the event instead.
    pub notice_in_conversation: bool,
}

impl SchedulerConfig {
    /// The defaults, switched off when `MEMLOOP_DISABLE_AUTO_MEMORY` or `MEMLOOP_SIMPLE` is truthy in `env`.
    ///
    /// ```
    /// use memloop_host::env::EnvVars;
    /// use memloop_memory::extract::SchedulerConfig;
    /// let env = EnvVars::from_pairs([("MEMLOOP_DISABLE_AUTO_MEMORY", "yes")]);
    /// assert!(!SchedulerConfig::from_env(&env).enabled);
    /// ```
    pub fn from_env(env: &memloop_host::env::EnvVars) -> Self {
        Self {
            enabled: memloop_paths::env::memory_enabled(env),
            ..Self::default()
        }
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            every_n_turns: 1,
            drain_timeout: Duration::from_secs(60),
            notice_in_conversation: false,
        }
    }
}

/// What one scheduler keeps for itself (the dir-wide running/pending state is in the slot).
#[derive(Default)]
struct Local {
    cursors: HashMap<String, MessageId>,
    /// Sessions whose first turn this scheduler has seen (where a resumed conversation's cursor
    /// was placed).
    started: HashSet<String>,
    /// Per session, the normal messages a compaction dropped before an extraction saw them
    /// (oldest first, at most [`MAX_CARRIED`]): the next run gets them ahead of the new ones.
    carried: HashMap<String, Vec<Message>>,
    turns_since_run: u32,
    /// Saved paths per session not yet noticed in the conversation.
    unnoticed: HashMap<String, Vec<String>>,
    /// Per session, the notice attached at the last turn start and its paths (re-queued when it
    /// did not land: the turn ended before it settled).
    in_flight: HashMap<String, (String, Vec<String>)>,
}

/// Most messages carried across compactions per session (the oldest are dropped beyond it,
/// with a warning): extraction that keeps failing must not grow without bound.
const MAX_CARRIED: usize = 400;

/// The attachment kind of the saved-memories notice.
pub const MEMORY_SAVED_ATTACHMENT_KIND: &str = "memory_saved";

struct Inner {
    store: Arc<dyn MemoryStore>,
    extractor: Arc<dyn Extractor>,
    config: SchedulerConfig,
    slot: Arc<DirSlot<Inner>>,
    local: Mutex<Local>,
}

/// The extraction stop hook: at most one extraction per memory dir at a time, with a trailing
/// run for the newest context that arrived meanwhile.
///
/// The mutex is per memory dir for the whole process: schedulers created for the same dir share
/// it (a context queued by one is run by its own extractor as the trailing run).
/// [`on_stop`](memloop_core::Hook::on_stop) only takes a short lock and spawns the run on the agent's
/// tracked background tasks, so it returns in microseconds even while an extraction runs.
///
/// Rules: main agent only; cursor per session = id of the last message covered;
/// skip and advance the cursor when the main agent itself wrote inside the memory dir since the
/// cursor; run every N eligible turns; a call during a run replaces the pending context (newest
/// wins) and exactly one trailing run follows; the cursor advances only after a successful run.
pub struct ExtractionScheduler {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ExtractionScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtractionScheduler")
            .field("store", &self.inner.store.describe().to_string())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

fn lock(local: &Mutex<Local>) -> MutexGuard<'_, Local> {
    // A poisoned lock only means a panic elsewhere while holding it; the state stays usable.
    local
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ExtractionScheduler {
    /// A scheduler for `store`'s memory dir running `extractor`.
    pub fn new(store: Arc<dyn MemoryStore>, extractor: Arc<dyn Extractor>) -> Self {
        Self::with_config(store, extractor, SchedulerConfig::default())
    }

    /// With explicit settings.
    pub fn with_config(
        store: Arc<dyn MemoryStore>,
        extractor: Arc<dyn Extractor>,
        config: SchedulerConfig,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                slot: slot_for(&store.describe().identity),
                store,
                extractor,
                config,
                local: Mutex::new(Local::default()),
            }),
        }
    }

    /// The id of the last message covered for `session_id`.
    pub fn cursor(&self, session_id: &str) -> Option<MessageId> {
        lock(&self.inner.local).cursors.get(session_id).cloned()
    }

    /// Whether an extraction (or its trailing run) is in progress for this memory dir.
    pub fn is_running(&self) -> bool {
        *self.inner.slot.busy.borrow()
    }

    /// Wait until the running extraction and its trailing run(s) finished, or `timeout`. On a
    /// timeout the report names what was still running and what was still queued.
    ///
    /// This only sees runs that [`on_stop`](memloop_core::Hook::on_stop) has already started: the agent
    /// fires its stop hooks as tracked background tasks, so right after `Agent::run_turn`
    /// returns this hook may not have been called yet and `drain` can return at once with
    /// nothing done. At shutdown hosts should call `Agent::drain` (or `Agent::drain_default`),
    /// which waits for the stop-hook tasks themselves and for the extraction they spawn on the
    /// same tracked tasks; use this method for the scheduler's own state (e.g. in tests or
    /// when driving the hook directly).
    pub async fn drain(&self, timeout: Duration) -> DrainReport {
        let mut rx = self.inner.slot.busy.subscribe();
        if tokio::time::timeout(timeout, rx.wait_for(|busy| !*busy))
            .await
            .is_ok()
        {
            return DrainReport {
                completed: true,
                still_running: Vec::new(),
            };
        }
        let state = self.inner.slot.lock();
        let root = self.inner.store.describe().to_string();
        let mut still = Vec::new();
        if let Some(r) = &state.running {
            let kind = if r.trailing {
                "trailing extraction"
            } else {
                "extraction"
            };
            still.push(format!(
                "{kind} for {root} (session {}, turn {})",
                r.session, r.turn
            ));
        }
        if let Some(p) = &state.pending {
            still.push(format!(
                "queued trailing extraction for {root} (session {}, turn {})",
                p.ctx.session_id, p.ctx.turn
            ));
        }
        DrainReport {
            completed: still.is_empty(),
            still_running: still,
        }
    }

    /// [`drain`](Self::drain) with the configured timeout (default 60 s).
    pub async fn drain_default(&self) -> DrainReport {
        self.drain(self.inner.config.drain_timeout).await
    }
}

impl Inner {
    /// The saved-memories notice for the next user message, if memories were saved since the
    /// last one that landed.
    fn notice(&self, ctx: &HookContext) -> Option<Attachment> {
        let mut local = lock(&self.local);
        if let Some((rendered, paths)) = local.in_flight.remove(&ctx.session_id) {
            let landed = ctx.messages.iter().flat_map(|m| &m.content).any(
                |b| matches!(b, memloop_core::message::ContentBlock::Text { text } if *text == rendered),
            );
            if !landed {
                let queue = local.unnoticed.entry(ctx.session_id.clone()).or_default();
                let mut back = paths;
                back.append(queue);
                *queue = back;
            }
        }
        let mut paths = local.unnoticed.remove(&ctx.session_id)?;
        let mut seen = std::collections::HashSet::new();
        paths.retain(|p| seen.insert(p.clone()));
        let attachment = Attachment {
            kind: MEMORY_SAVED_ATTACHMENT_KIND.into(),
            text: format!("Memory saved: {}", paths.join(", ")),
        };
        local
            .in_flight
            .insert(ctx.session_id.clone(), (attachment.render(), paths));
        Some(attachment)
    }
}

#[async_trait::async_trait]
impl Hook for ExtractionScheduler {
    async fn on_turn_start(
        &self,
        ctx: &HookContext,
        _user_text: &str,
    ) -> Option<PendingAttachment> {
        if !ctx.is_main() || !self.inner.config.notice_in_conversation {
            return None;
        }
        let attachment = self.inner.notice(ctx)?;
        Some(PendingAttachment::spawn(
            ctx.cancel.child_token(),
            async move { Some(attachment) },
        ))
    }

    /// Keep the messages after the cursor that the compaction is about to drop, so the next
    /// extraction sees them (a fact stated early in a long session is not lost to compaction).
    async fn on_compacting(&self, ctx: &HookContext) {
        if !ctx.is_main() || !self.inner.config.enabled {
            return;
        }
        let mut local = lock(&self.inner.local);
        let cursor = local.cursors.get(&ctx.session_id).cloned();
        let unseen: Vec<Message> = messages_after(&ctx.messages, cursor.as_ref())
            .iter()
            .filter(|m| m.meta.kind == MessageKind::Normal || self.inner.wrote_memory(m))
            .cloned()
            .collect();
        if unseen.is_empty() {
            return;
        }
        let carried = local.carried.entry(ctx.session_id.clone()).or_default();
        carried.extend(unseen);
        if carried.len() > MAX_CARRIED {
            let dropped = carried.len() - MAX_CARRIED;
            carried.drain(..dropped);
            tracing::warn!(
                dropped,
                "too many messages carried across compactions; oldest dropped"
            );
        }
    }

    /// Everything in the compacted conversation was either carried or is the summary: the
    /// cursor moves to its end.
    async fn on_compacted(&self, ctx: &HookContext) {
        if !ctx.is_main() || !self.inner.config.enabled {
            return;
        }
        let carrying = lock(&self.inner.local)
            .carried
            .contains_key(&ctx.session_id);
        if let (true, Some(last)) = (carrying, ctx.messages.last()) {
            self.inner.advance(&ctx.session_id, last.id.clone());
        }
    }

    async fn on_stop(&self, ctx: HookContext) {
        if !ctx.is_main() || !self.inner.config.enabled {
            return;
        }
        self.inner.start_session(&ctx);
        {
            let mut state = self.inner.slot.lock();
            if state.running.is_some() {
                tracing::debug!(
                    turn = ctx.turn,
                    "extraction running; context kept as pending"
                );
                state.pending = Some(Pending {
                    ctx,
                    owner: self.inner.clone(),
                });
                return;
            }
            state.running = Some(RunInfo {
                session: ctx.session_id.clone(),
                turn: ctx.turn,
                trailing: false,
            });
            self.inner.slot.busy.send_replace(true);
        }
        let inner = self.inner.clone();
        let background = ctx.background.clone();
        background.spawn(
            "memory-extraction",
            async move { inner.run_chain(ctx).await },
        );
    }
}

/// Frees the memory dir's slot if the run chain ends abnormally (a panic outside the extractor's
/// `catch_unwind`, e.g. in an event sink, or an aborted task): without it the dir would stay
/// busy for the whole process. Disarmed on the normal exit, which clears the slot itself.
struct ChainGuard {
    slot: Arc<DirSlot<Inner>>,
    armed: bool,
}

impl Drop for ChainGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::warn!("extraction chain ended abnormally; releasing the memory dir");
        let mut state = self.slot.lock();
        state.running = None;
        state.pending = None;
        self.slot.busy.send_replace(false);
    }
}

impl Inner {
    /// At the first turn this scheduler sees of a session, the cursor goes before that turn:
    /// what came before it is a resumed conversation, which its own session's extractions
    /// covered, so the first extraction after a resume reads only the new turns. (In a new
    /// session the first turn is the conversation's start, and nothing moves.)
    fn start_session(&self, ctx: &HookContext) {
        let mut local = lock(&self.local);
        if !local.started.insert(ctx.session_id.clone())
            || local.cursors.contains_key(&ctx.session_id)
        {
            return;
        }
        if let Some(start) = turn_start(&ctx.messages).filter(|&i| i > 0) {
            let before = ctx.messages[start - 1].id.clone();
            tracing::debug!(session = %ctx.session_id, "resumed conversation: extraction starts after it");
            local.cursors.insert(ctx.session_id.clone(), before);
        }
    }

    async fn run_chain(self: Arc<Self>, first: HookContext) {
        let mut guard = ChainGuard {
            slot: self.slot.clone(),
            armed: true,
        };
        let (mut owner, mut ctx) = (self, first);
        let mut trailing = false;
        loop {
            owner.run_once(&ctx, trailing).await;
            let slot = owner.slot.clone();
            let mut state = slot.lock();
            match state.pending.take() {
                Some(next) => {
                    state.running = Some(RunInfo {
                        session: next.ctx.session_id.clone(),
                        turn: next.ctx.turn,
                        trailing: true,
                    });
                    (owner, ctx) = (next.owner, next.ctx);
                    trailing = true;
                }
                None => {
                    state.running = None;
                    slot.busy.send_replace(false);
                    guard.armed = false;
                    return;
                }
            }
        }
    }

    async fn run_once(&self, ctx: &HookContext, trailing: bool) {
        let Some(last_id) = ctx.messages.last().map(|m| m.id.clone()) else {
            return;
        };
        let (cursor, carried) = {
            let local = lock(&self.local);
            let carried = local
                .carried
                .get(&ctx.session_id)
                .cloned()
                .unwrap_or_default();
            (local.cursors.get(&ctx.session_id).cloned(), carried)
        };
        let after = messages_after(&ctx.messages, cursor.as_ref());
        if carried.iter().chain(after).any(|m| self.wrote_memory(m)) {
            self.advance(&ctx.session_id, last_id);
            self.drop_carried(&ctx.session_id, carried.len());
            ctx.emit(MemoryEvent::ExtractionSkipped {
                reason: "the main agent already wrote to the memory directory since the last \
                         extraction"
                    .into(),
            });
            return;
        }
        let new_messages: Vec<Message> = carried
            .iter()
            .chain(after)
            .filter(|m| m.meta.kind == MessageKind::Normal)
            .cloned()
            .collect();
        if new_messages.is_empty() {
            ctx.emit(MemoryEvent::ExtractionSkipped {
                reason: "no new messages since the last extraction".into(),
            });
            return;
        }
        if !trailing {
            let mut state = lock(&self.local);
            state.turns_since_run += 1;
            if state.turns_since_run < self.config.every_n_turns {
                let (n, every) = (state.turns_since_run, self.config.every_n_turns);
                drop(state);
                ctx.emit(MemoryEvent::ExtractionSkipped {
                    reason: format!("throttled: eligible turn {n} of {every}"),
                });
                return;
            }
            state.turns_since_run = 0;
        }
        // The run's span: how many messages it read, which memories it saved or why it failed
        // (paths only); the extractor's fork and its model requests nest under it.
        let span = tracing::info_span!(
            "extract",
            memloop.extract.trailing = trailing,
            memloop.extract.messages = new_messages.len() as u64,
            memloop.extract.saved = tracing::field::Empty,
            memloop.extract.refused = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let ectx = ExtractionContext {
            hook: ctx.clone(),
            new_messages,
            trailing,
        };
        let result = tracing::Instrument::instrument(
            AssertUnwindSafe(self.extractor.extract(&ectx)).catch_unwind(),
            span.clone(),
        )
        .await
        .unwrap_or_else(|_| Err(ExtractError::Failed("the extractor panicked".into())));
        match &result {
            Ok(paths) => span.record("memloop.extract.saved", paths.len() as u64),
            Err(_) => span.record("error.type", "extraction_failed"),
        };
        match result {
            Ok(paths) => {
                self.advance(&ctx.session_id, last_id);
                self.drop_carried(&ctx.session_id, carried.len());
                // The extractor's memory paths, deduplicated (its contract allows repeats).
                let mut saved: Vec<String> = Vec::new();
                for path in paths {
                    let path = path.into_string();
                    if !saved.contains(&path) {
                        saved.push(path);
                    }
                }
                tracing::info!(saved = ?saved, trailing, "extraction finished");
                if !saved.is_empty() {
                    if self.config.notice_in_conversation {
                        lock(&self.local)
                            .unnoticed
                            .entry(ctx.session_id.clone())
                            .or_default()
                            .extend(saved.iter().cloned());
                    }
                    ctx.emit(MemoryEvent::MemoriesSaved { paths: saved });
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, trailing, "extraction failed; cursor kept");
                ctx.emit(MemoryEvent::ExtractionFailed {
                    error: e.to_string(),
                });
            }
        }
    }

    fn advance(&self, session: &str, to: MessageId) {
        lock(&self.local).cursors.insert(session.to_owned(), to);
    }

    /// Forget the first `n` carried messages of `session` (the ones a finished run covered;
    /// a compaction during the run may have carried more).
    fn drop_carried(&self, session: &str, n: usize) {
        let mut local = lock(&self.local);
        if let Some(carried) = local.carried.get_mut(session) {
            carried.drain(..n.min(carried.len()));
            if carried.is_empty() {
                local.carried.remove(session);
            }
        }
    }

    fn wrote_memory(&self, m: &Message) -> bool {
        m.meta
            .files_written
            .iter()
            .any(|f| self.store.memory_path_of(f).is_ok())
    }
}

/// Where the current turn starts: the newest user message that answers no tool call (the
/// user's prompt).
fn turn_start(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(|m| {
        m.role == memloop_core::message::Role::User
            && m.meta.kind == MessageKind::Normal
            && m.tool_result_ids().next().is_none()
    })
}

/// Messages after the cursor; all of them when there is no cursor or it is gone (a compaction
/// without a carry: the cursor was set before the conversation was replaced some other way).
fn messages_after<'a>(messages: &'a [Message], cursor: Option<&MessageId>) -> &'a [Message] {
    match cursor.and_then(|c| messages.iter().position(|m| &m.id == c)) {
        Some(i) => &messages[i + 1..],
        None => messages,
    }
}
