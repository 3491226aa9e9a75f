//! # memloop-transcripts
//!
//! Session transcripts: every conversation persisted append-only as JSONL, one record per line,
//! in Claude Code's layout (`<projects dir>/<slug>/<session id>.jsonl`), and what reads them
//! back: listing, loading a conversation to resume it, a bounded search, and the
//! `transcript_search` tool that gives the main agent that search.
//!
//! - [`TranscriptHook`] writes the transcript (a [`Hook`](memloop_core::Hook) on the agent loop:
//!   it sees the conversation exactly as the model does, tool results and attachments included);
//! - [`TranscriptDir`] reads a project's transcripts (a torn last line, left by a crash in the
//!   middle of a write, is skipped with a warning), searches them and applies the retention;
//! - [`TranscriptSearchTool`] and [`PastContextSection`] give the main agent the search and the
//!   "searching past context" guidance.
#![warn(missing_docs)]

mod file;
mod hook;
mod search;
mod tool;

pub use file::{
    RecordKind, SessionInfo, Transcript, TranscriptConfig, TranscriptDir, TranscriptRecord,
};
pub use hook::TranscriptHook;
pub use search::{SearchHit, SearchOptions};
pub use tool::{PastContextSection, TRANSCRIPT_SEARCH, TranscriptSearchTool};
