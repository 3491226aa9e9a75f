//! # memloop-compact
//!
//! Keeps a long conversation inside the context window (SPEC section 9). The [`Compactor`]
//! implements `memloop_core::ContextCompactor`: when the conversation reaches the auto-compact
//! threshold it first tries **session-memory compaction** (the session notes become the summary,
//! the most recent 10K-40K tokens are kept verbatim) and falls back to an **LLM summary**. It
//! also offers opt-in [`repair`] passes for broken conversations.
#![warn(missing_docs)]

mod breaker;
mod compactor;
mod config;
mod keep;
mod notes;
pub mod repair;
mod rounds;
mod session_memory;
mod summary;

pub use breaker::CircuitBreaker;
pub use compactor::{Compactor, STRATEGY_SESSION_MEMORY, STRATEGY_SUMMARY};
pub use config::{
    CompactConfig, ContextLevel, ENV_AUTOCOMPACT_PCT, ENV_DISABLE_AUTO_COMPACT,
    ENV_DISABLE_COMPACT, EnvSource, ProcessEnv, SessionMemoryCompactConfig, SummaryCompactConfig,
    Thresholds, is_truthy,
};
pub use keep::{KeepBounds, KeepPlan, adjust_for_invariants, compaction_floor, plan_keep};
pub use notes::{
    SECTION_TRUNCATED, SUMMARY_TEMPLATE, TRUNCATION_NOTE, summary_text, truncate_sections,
};
pub use repair::{Issue, repair, repair_fn};
pub use rounds::{DROPPED_PLACEHOLDER, api_rounds, drop_oldest_rounds};
pub use session_memory::{
    DeclineReason, SessionMemoryCompaction, plan_session_memory_compaction,
    session_memory_compaction, wait_for_update,
};
pub use summary::{SUMMARY_MESSAGE, SUMMARY_PROMPT, SummaryError, summary_compaction};
