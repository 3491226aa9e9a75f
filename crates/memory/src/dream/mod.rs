//! Dream (consolidation): an occasional background forked agent that merges,
//! dedups and prunes the memory dir, behind gates checked cheapest first.
//!
//! - [`DreamHook`]: the [`Hook`](memloop_core::Hook) (on stop) that checks the gates and runs the [`Consolidator`];
//!   [`DreamHook::run_now`] does the same on demand, outside any agent (`memloop memory dream`).
//! - [`ConsolidationLock`]: the PID lock file whose mtime is the last consolidation.
//! - [`SessionSource`]: what "sessions touched" means; [`SessionRecords`] (default) counts the
//!   one-record-per-session files the hook itself writes, [`ProjectDirSessions`] counts
//!   transcripts / session dirs of a project dir.
//! - [`DailyLogTool`]: daily-log mode (`logs/YYYY/MM/YYYY-MM-DD.md`).

mod consolidator;
mod hook;
mod lock;
mod sessions;

pub use crate::daily_log::{DailyLogTool, MEMORY_LOG_APPEND, daily_log_path};
pub use consolidator::{Consolidator, DREAM_PURPOSE};
pub use hook::{DreamConfig, DreamGate, DreamHook, ManualDream};
pub use lock::{CONSOLIDATE_LOCK, ConsolidationLock, LockAttempt, LockGuard};
pub use sessions::{ProjectDirSessions, SessionRecords, SessionSource};
