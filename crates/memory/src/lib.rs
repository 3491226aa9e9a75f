//! # memloop-memory
//!
//! Persistent, file-based memory for memloop agents: the memory dir on disk (`MEMORY.md` index +
//! typed topic files, compatible with Claude Code's format) and everything that reads or writes
//! it. Each part is a module named for what it does:
//!
//! | module | what it holds |
//! |---|---|
//! | [`store`] | the [`MemoryStore`](store::MemoryStore) trait, [`FileMemoryStore`](store::FileMemoryStore), the memory types and the name / secret rules every write obeys |
//! | [`agents`] | sub-agent definitions on disk (Claude Code's `.claude/agents/*.md` format) and each sub-agent's own memory scope |
//! | [`paths`] | where a project's memory dir lives (settings, environment, git root, agent scopes) |
//! | [`recall`] | [`Selector`](recall::Selector)s and the hook that surfaces relevant memories each turn |
//! | [`extract`] | the stop hook that writes new memories in the background with a forked agent |
//! | [`consolidate`] | the "dream": periodic consolidation of the memory dir |
//! | [`session_memory`] | per-session notes, used as the summary when compacting |
//! | [`instructions`] | `CLAUDE.md` / `AGENTS.md` loading with `@includes` |
//! | [`tools`] | the `memory_read` / `memory_write` tools the main agent gets, and Anthropic's `memory_20250818` command set |
//! | [`prompt`] | the system-prompt section with the memory guidance and the index |
//! | [`transcripts`] | session transcripts (JSONL, Claude Code's layout): the writer hook, reading, resuming, the bounded search and its tool |
//! | [`env`](mod@env) | the environment switches (`MEMLOOP_*`) |
#![warn(missing_docs)]

pub mod agents;
pub mod consolidate;
pub mod env;
pub mod extract;
pub mod instructions;
pub mod paths;
pub mod prompt;
pub mod recall;
pub mod store;
pub mod tools;
pub mod transcripts;

/// Per-session notes, used as the summary when compacting: the `memloop-session-notes` crate,
/// re-exported here so memory users find it beside the rest of memory.
pub use memloop_session_notes as session_memory;

mod anthropic_memory_tool;
mod changes;
mod daily_log;
mod file_feed;
mod file_store;
mod frontmatter;
mod index;
mod index_file;
mod manifest;
mod memory_path;
mod memory_store;
mod project;
mod resolver;
mod safety;
mod scan;
mod scan_cache;
mod scopes;
mod team;
mod types;
mod writer_tools;
