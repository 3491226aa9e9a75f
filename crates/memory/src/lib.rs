//! # memloop-memory
//!
//! What writes memories, and the agent-facing side of memory: the tools the main agent gets, the
//! stop hook whose forked extractor saves new memories in the background, consolidation (the
//! "dream"), the daily log, the memory section of the system prompt and the memory of
//! sub-agents. The memory dir itself is `memloop-store`'s, recall is `memloop-recall`'s, project
//! instructions are `memloop-instructions`', session transcripts `memloop-transcripts`' and
//! sub-agents `memloop-subagents`'; the `memloop` facade gathers the memory crates under
//! `memloop::memory`.
//!
//! | module | what it holds |
//! |---|---|
//! | [`agent_memory`] | the memory of sub-agents: each sub-agent's own memory scope, and none of the parent's (the sub-agents and their definitions are `memloop-subagents`') |
//! | [`extract`] | the stop hook that writes new memories in the background with a forked agent |
//! | [`dream`] | the dream: periodic consolidation of the memory dir by a forked agent, and the daily log |
//! | [`session_notes`] | per-session notes, used as the summary when compacting |
//! | [`tools`] | the `memory_read` / `memory_write` tools the main agent gets, and Anthropic's `memory_20250818` command set |
//! | [`prompt`] | the system-prompt section with the memory guidance and the index |
#![warn(missing_docs)]

pub mod agent_memory;
pub mod dream;
pub mod extract;
pub mod prompt;
pub mod tools;

/// Per-session notes, used as the summary when compacting: the `memloop-session-notes` crate,
/// re-exported here so memory users find it beside the rest of memory.
pub use memloop_session_notes as session_notes;

/// Why a background writer (the extractor, the consolidator) failed.
pub use writer_tools::WriterError;

/// What the memory writers tell hosts (an [`AgentEvent::Extension`](memloop_core::events::AgentEvent::Extension)).
pub use events::MemoryEvent;

mod anthropic_memory_tool;
mod daily_log;
mod events;
mod writer_tools;
