//! The per-memory-dir mutex of extraction: one [`DirSlot`] per (canonical) memory dir in the
//! process, shared by every `ExtractionScheduler` on that dir.

use memloop_core::HookContext;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use tokio::sync::watch;

/// Who is running, for drain reports.
#[derive(Debug, Clone)]
pub(crate) struct RunInfo {
    pub session: String,
    pub turn: u64,
    pub trailing: bool,
}

/// A context waiting for the trailing run, with the scheduler state (`O`) that will run it.
pub(crate) struct Pending<O> {
    pub ctx: HookContext,
    pub owner: Arc<O>,
}

pub(crate) struct SlotState<O> {
    pub running: Option<RunInfo>,
    pub pending: Option<Pending<O>>,
}

/// The running/pending state of one memory dir and a "busy" signal for `drain`.
pub(crate) struct DirSlot<O> {
    state: Mutex<SlotState<O>>,
    pub busy: watch::Sender<bool>,
}

impl<O> DirSlot<O> {
    fn new() -> Self {
        Self {
            state: Mutex::new(SlotState {
                running: None,
                pending: None,
            }),
            busy: watch::channel(false).0,
        }
    }

    /// Lock the state (a poisoned lock only means a panic elsewhere; the state stays usable).
    pub fn lock(&self) -> MutexGuard<'_, SlotState<O>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The slot of the store with this identity in this process (created on first use, dropped with its last scheduler).
pub(crate) fn slot_for<O: Send + Sync + 'static>(identity: &str) -> Arc<DirSlot<O>> {
    type Registry = Mutex<HashMap<String, Weak<dyn std::any::Any + Send + Sync>>>;
    static SLOTS: OnceLock<Registry> = OnceLock::new();
    let key = identity.to_owned();
    let mut slots = SLOTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    slots.retain(|_, w| w.strong_count() > 0);
    if let Some(slot) = slots
        .get(&key)
        .and_then(Weak::upgrade)
        .and_then(|any| any.downcast::<DirSlot<O>>().ok())
    {
        return slot;
    }
    let slot = Arc::new(DirSlot::new());
    let erased: Arc<dyn std::any::Any + Send + Sync> = slot.clone();
    slots.insert(key, Arc::downgrade(&erased));
    slot
}
