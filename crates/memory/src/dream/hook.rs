//! The dream's gates and its stop hook ([`DreamHook`]), and the on-demand run.

use super::{
    ConsolidationLock, Consolidator, LockAttempt, LockGuard, SessionRecords, SessionSource,
};
use crate::WriterError;
use crate::events::MemoryEvent;
use crate::writer_tools::relative_to_memory_dir;
use memloop_core::Hook;
use memloop_core::{HookContext, events::AgentEvent};
use memloop_store::{LocalPurpose, MemoryStore};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// Settings of the dream (defaults in parentheses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DreamConfig {
    /// Run at all.
    pub enabled: bool,
    /// Minimum time since the last consolidation (24 h).
    pub min_interval: Duration,
    /// At most one session scan per this interval (10 min).
    pub scan_interval: Duration,
    /// Sessions touched since the last consolidation, excluding the current one (5).
    pub min_sessions: usize,
    /// A lock younger than this held by a live PID blocks (1 h).
    pub stale_lock_after: Duration,
}

impl DreamConfig {
    /// The defaults, switched off when `MEMLOOP_DISABLE_AUTO_MEMORY` or `MEMLOOP_SIMPLE` is truthy in `env`.
    pub fn from_env(env: &memloop_host::env::EnvVars) -> Self {
        Self {
            enabled: memloop_paths::env::memory_enabled(env),
            ..Self::default()
        }
    }
}

impl Default for DreamConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            min_interval: Duration::from_secs(24 * 3_600),
            scan_interval: Duration::from_secs(600),
            min_sessions: 5,
            stale_lock_after: Duration::from_secs(3_600),
        }
    }
}

/// The gate that stopped a dream (reported as `DreamSkipped { gate }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DreamGate {
    /// Dreaming is switched off.
    Disabled,
    /// A dream of this hook is already running.
    Running,
    /// Less than `min_interval` since the last consolidation.
    Time,
    /// A session scan happened less than `scan_interval` ago.
    ScanThrottle,
    /// Fewer than `min_sessions` sessions touched since the last consolidation.
    Sessions,
    /// Another process holds the lock (or won the race for it).
    Lock,
}

impl DreamGate {
    /// The name used in events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Running => "running",
            Self::Time => "time",
            Self::ScanThrottle => "scan_throttle",
            Self::Sessions => "sessions",
            Self::Lock => "lock",
        }
    }
}

struct Inner {
    store: Arc<dyn MemoryStore>,
    config: DreamConfig,
    sessions: Arc<dyn SessionSource>,
    consolidator: Consolidator,
    lock: ConsolidationLock,
    last_scan: Mutex<Option<Instant>>,
    running: AtomicBool,
    recorded: Mutex<std::collections::HashSet<String>>,
}

/// The dream stop hook: on the main agent's turn end it checks the gates cheapest first
/// (enabled, time, scan throttle, sessions, lock) in a tracked background task and, when all
/// pass, runs the [`Consolidator`]; success leaves the lock's mtime at now, failure rolls it back.
/// `on_stop` itself only flips a flag and spawns.
#[derive(Clone)]
pub struct DreamHook {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DreamHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DreamHook")
            .field("store", &self.inner.store.describe().to_string())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Clears the running flag even if the dream task panics or is aborted.
struct RunningFlag(Arc<Inner>);

impl Drop for RunningFlag {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::SeqCst);
    }
}

impl DreamHook {
    /// A hook with the default config, counting the session records it writes itself
    /// ([`SessionRecords::for_memory_dir`]) and the default [`Consolidator`].
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        let sessions = Arc::new(SessionRecords::for_memory_dir(
            &store.local_dir_or_temp(LocalPurpose::SessionRecords),
        ));
        let consolidator = Consolidator::new(store.clone());
        Self::with_parts(store, DreamConfig::default(), sessions, consolidator)
    }

    /// Full control: config, session source and consolidator.
    pub fn with_parts(
        store: Arc<dyn MemoryStore>,
        config: DreamConfig,
        sessions: Arc<dyn SessionSource>,
        consolidator: Consolidator,
    ) -> Self {
        let lock = ConsolidationLock::new(&store.local_dir_or_temp(LocalPurpose::Locks))
            .stale_after(config.stale_lock_after);
        Self {
            inner: Arc::new(Inner {
                store,
                config,
                sessions,
                consolidator,
                lock,
                last_scan: Mutex::new(None),
                running: AtomicBool::new(false),
                recorded: Mutex::new(std::collections::HashSet::new()),
            }),
        }
    }

    /// Check the gates after `enabled` for `session_id`, in order; all pass → the held lock.
    pub async fn check_gates(&self, session_id: &str) -> Result<LockGuard, DreamGate> {
        self.inner.check_gates(session_id).await
    }

    /// Consolidate now, outside any agent turn (`memloop memory dream`): the gates in order
    /// (time, scan throttle, sessions; `force` skips them), then the same cross-process lock as
    /// the stop hook (never skipped: a consolidation running elsewhere is reported as
    /// [`DreamGate::Lock`]), then [`Consolidator::run_standalone`] over `model`. Like the hook,
    /// success leaves the lock's mtime at now and failure rolls it back. `enabled` is not
    /// checked: asking for a consolidation is the switch.
    pub async fn run_now(
        &self,
        model: Arc<dyn memloop_core::model::Model>,
        force: bool,
    ) -> Result<ManualDream, WriterError> {
        let gates = if force {
            self.inner.acquire_lock().await
        } else {
            self.inner.check_gates("manual-dream").await
        };
        let guard = match gates {
            Ok(g) => g,
            Err(gate) => return Ok(ManualDream::Skipped(gate)),
        };
        match self.inner.consolidator.run_standalone(model).await {
            Ok(paths) => {
                if let Err(e) = guard.commit() {
                    tracing::warn!(error = %e, "dream: cannot touch the lock");
                }
                Ok(ManualDream::Finished {
                    paths: relative_to_memory_dir(self.inner.store.as_ref(), &paths),
                })
            }
            Err(e) => {
                if let Err(e) = guard.rollback() {
                    tracing::warn!(error = %e, "dream: cannot roll the lock back");
                }
                Err(e)
            }
        }
    }
}

/// What [`DreamHook::run_now`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManualDream {
    /// The consolidator ran; these memories were written (relative paths, `MEMORY.md`
    /// excluded).
    Finished {
        /// Files written.
        paths: Vec<String>,
    },
    /// A gate stopped it (only [`DreamGate::Lock`] when forced).
    Skipped(DreamGate),
}

impl Inner {
    async fn check_gates(&self, session_id: &str) -> Result<LockGuard, DreamGate> {
        let last = self.lock.last_consolidation().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot stat the consolidation lock");
            None
        });
        if let Some(t) = last {
            let since = SystemTime::now()
                .duration_since(t)
                .unwrap_or(Duration::ZERO);
            if since < self.config.min_interval {
                return Err(DreamGate::Time);
            }
        }
        {
            let mut scan = self
                .last_scan
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if scan.is_some_and(|at| at.elapsed() < self.config.scan_interval) {
                return Err(DreamGate::ScanThrottle);
            }
            *scan = Some(Instant::now());
        }
        let (sessions, current) = (self.sessions.clone(), session_id.to_owned());
        let since = last.unwrap_or(SystemTime::UNIX_EPOCH);
        let touched =
            tokio::task::spawn_blocking(move || sessions.touched_since(since, &current)).await;
        match touched {
            Ok(Ok(ids)) if ids.len() >= self.config.min_sessions => {}
            Ok(Ok(ids)) => {
                tracing::debug!(touched = ids.len(), "dream: not enough sessions");
                return Err(DreamGate::Sessions);
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "dream: cannot count sessions");
                return Err(DreamGate::Sessions);
            }
            Err(e) => {
                tracing::warn!(error = %e, "dream: session scan task failed");
                return Err(DreamGate::Sessions);
            }
        }
        self.acquire_lock().await
    }

    /// The last gate: the cross-process lock.
    async fn acquire_lock(&self) -> Result<LockGuard, DreamGate> {
        let lock = self.lock.clone();
        match tokio::task::spawn_blocking(move || lock.acquire()).await {
            Ok(Ok(LockAttempt::Acquired(guard))) => Ok(guard),
            Ok(Ok(other)) => {
                tracing::info!(?other, "dream: lock not acquired");
                Err(DreamGate::Lock)
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "dream: cannot take the lock");
                Err(DreamGate::Lock)
            }
            Err(e) => {
                tracing::warn!(error = %e, "dream: lock task failed");
                Err(DreamGate::Lock)
            }
        }
    }

    async fn run(&self, ctx: HookContext) {
        // The dream's span: the gate that stopped it, or how many memories it wrote (paths and
        // counts only); its fork and model requests nest under it.
        let span = tracing::info_span!(
            "dream",
            memloop.dream.skipped = tracing::field::Empty,
            memloop.dream.written = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        tracing::Instrument::instrument(self.run_traced(ctx), span).await
    }

    async fn run_traced(&self, ctx: HookContext) {
        let span = tracing::Span::current();
        let guard = match self.check_gates(&ctx.session_id).await {
            Ok(g) => g,
            Err(gate) => {
                span.record("memloop.dream.skipped", gate.as_str());
                ctx.emit(MemoryEvent::DreamSkipped {
                    gate: gate.as_str().into(),
                });
                return;
            }
        };
        let result = self.consolidator.run(&ctx).await;
        match &result {
            Ok(paths) => span.record("memloop.dream.written", paths.len() as u64),
            Err(_) => span.record("error.type", "dream_failed"),
        };
        match result {
            Ok(paths) => {
                if let Err(e) = guard.commit() {
                    tracing::warn!(error = %e, "dream: cannot touch the lock");
                }
                ctx.emit(MemoryEvent::DreamFinished {
                    paths: relative_to_memory_dir(self.store.as_ref(), &paths),
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "dream failed; lock rolled back");
                if let Err(e) = guard.rollback() {
                    tracing::warn!(error = %e, "dream: cannot roll the lock back");
                }
                ctx.emit(AgentEvent::Warning {
                    message: format!("memory consolidation failed: {e}"),
                });
            }
        }
    }
}

#[async_trait::async_trait]
impl Hook for DreamHook {
    async fn on_stop(&self, ctx: HookContext) {
        if !ctx.is_main() {
            return;
        }
        if !self.inner.config.enabled {
            ctx.emit(MemoryEvent::DreamSkipped {
                gate: DreamGate::Disabled.as_str().into(),
            });
            return;
        }
        let first_stop = self
            .inner
            .recorded
            .lock()
            .map(|mut r| r.insert(ctx.session_id.clone()))
            .unwrap_or(false);
        if first_stop {
            let (sessions, id) = (self.inner.sessions.clone(), ctx.session_id.clone());
            ctx.background.spawn("memory-session-record", async move {
                match tokio::task::spawn_blocking(move || sessions.record(&id)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "cannot record the session"),
                    Err(e) => tracing::warn!(error = %e, "session record task failed"),
                }
            });
        }
        if self.inner.running.swap(true, Ordering::SeqCst) {
            ctx.emit(MemoryEvent::DreamSkipped {
                gate: DreamGate::Running.as_str().into(),
            });
            return;
        }
        let flag = RunningFlag(self.inner.clone());
        let inner = self.inner.clone();
        let background = ctx.background.clone();
        background.spawn("memory-dream", async move {
            let _flag = flag;
            inner.run(ctx).await;
        });
    }
}
