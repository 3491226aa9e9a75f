//! Tracked background tasks (stop hooks, extraction, session-memory updates) and `drain`.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::task::TaskTracker;

/// What [`BackgroundTasks::drain`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainReport {
    /// Whether every task finished before the timeout.
    pub completed: bool,
    /// Names of tasks still running at the timeout (empty when `completed`).
    pub still_running: Vec<String>,
}

impl std::fmt::Display for DrainReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.completed {
            f.write_str("all background work finished")
        } else {
            write!(
                f,
                "timed out; still running: {}",
                self.still_running.join(", ")
            )
        }
    }
}

/// A set of named, tracked tokio tasks. Cloning shares the set.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_core::BackgroundTasks;
/// use std::time::Duration;
/// let tasks = BackgroundTasks::new();
/// tasks.spawn("work", async {});
/// let report = tasks.drain(Duration::from_secs(1)).await;
/// assert!(report.completed);
/// # }
/// ```
#[derive(Clone, Default)]
pub struct BackgroundTasks {
    tracker: TaskTracker,
    running: Arc<Mutex<BTreeMap<u64, String>>>,
    next_id: Arc<AtomicU64>,
}

impl std::fmt::Debug for BackgroundTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundTasks")
            .field("running", &self.running_names())
            .finish()
    }
}

struct Deregister {
    running: Arc<Mutex<BTreeMap<u64, String>>>,
    id: u64,
}

impl Drop for Deregister {
    fn drop(&mut self) {
        if let Ok(mut r) = self.running.lock() {
            r.remove(&self.id);
        }
    }
}

impl BackgroundTasks {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawn a tracked task. Must be called inside a tokio runtime.
    pub fn spawn<F>(&self, name: impl Into<String>, fut: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let name = name.into();
        if let Ok(mut r) = self.running.lock() {
            r.insert(id, name.clone());
        }
        let guard = Deregister {
            running: self.running.clone(),
            id,
        };
        let span = tracing::debug_span!("background", task = %name);
        self.tracker.spawn(tracing::Instrument::instrument(
            async move {
                let _guard = guard;
                fut.await;
            },
            span,
        ))
    }

    /// Names of tasks still running.
    pub fn running_names(&self) -> Vec<String> {
        self.running
            .lock()
            .map(|r| r.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Wait until every task (including tasks spawned while waiting) finished, or `timeout`.
    pub async fn drain(&self, timeout: Duration) -> DrainReport {
        self.tracker.close();
        let finished = tokio::time::timeout(timeout, self.tracker.wait())
            .await
            .is_ok();
        self.tracker.reopen();
        if finished {
            DrainReport {
                completed: true,
                still_running: Vec::new(),
            }
        } else {
            DrainReport {
                completed: false,
                still_running: self.running_names(),
            }
        }
    }
}
