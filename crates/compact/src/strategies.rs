//! The compaction strategies on their own, for hosts that compose their own compactor:
//! session-memory compaction (the session notes become the summary; the keep walk picks the
//! recent messages kept verbatim) and the LLM summary fallback.

pub use crate::keep::{KeepBounds, KeepPlan, plan_keep};
pub use crate::notes::SECTION_TRUNCATED;
pub use crate::notes_compaction::{
    DeclineReason, SessionMemoryCompaction, plan_session_memory_compaction,
    session_memory_compaction, wait_for_update,
};
pub use crate::summary::summary_compaction;
