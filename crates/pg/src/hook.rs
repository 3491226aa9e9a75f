//! [`TeamPullHook`]: pull the team store into the local memory dir when a session starts.

use crate::sync::{SyncOptions, TeamSync};
use async_trait::async_trait;
use memloop_core::hooks::PendingAttachment;
use memloop_core::{Hook, HookContext};
use std::sync::atomic::{AtomicBool, Ordering};

/// Pulls once, on the first user turn of a session, in the background (the turn never waits
/// for it). A failure (server down, wrong URL) is logged and the agent keeps working on its
/// local memory.
#[derive(Debug)]
pub struct TeamPullHook {
    sync: TeamSync,
    done: AtomicBool,
}

impl TeamPullHook {
    /// A hook pulling with `sync` (deletions are not propagated).
    pub fn new(sync: TeamSync) -> Self {
        Self {
            sync,
            done: AtomicBool::new(false),
        }
    }
}

#[async_trait]
impl Hook for TeamPullHook {
    async fn on_turn_start(
        &self,
        ctx: &HookContext,
        _user_text: &str,
    ) -> Option<PendingAttachment> {
        if self.done.swap(true, Ordering::SeqCst) {
            return None;
        }
        let sync = self.sync.clone();
        let _task = ctx.background.spawn("team_memory_pull", async move {
            match sync.pull(SyncOptions::default()).await {
                Ok(r) => tracing::info!(
                    changed = r.items.len(),
                    conflicts = r.conflicts(),
                    "team memory pulled at session start"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "team memory pull failed; using local memory only")
                }
            }
        });
        None
    }
}
