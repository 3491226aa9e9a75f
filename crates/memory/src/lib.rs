//! # memloop-memory
//!
//! Persistent, file-based memory for memloop agents: the memory dir on disk (`MEMORY.md` index +
//! typed topic files, compatible with Claude Code's format), the [`MemoryStore`] trait and its
//! file implementation, selectors and recall, background extraction, session notes,
//! consolidation, and project-instruction loading.
#![warn(missing_docs)]

mod instructions;
mod manifest;
mod scopes;
mod store;
mod types;

pub use instructions::{
    DEFAULT_TEXT_EXTENSIONS, FileStatus, Glob, InstructionConfig, InstructionError,
    InstructionFile, InstructionKind, InstructionLoader, Instructions, InstructionsSection,
    LoadOptions, LoadReport, MemoryIndexText, ReportEntry, SkipReason, render_instructions,
};
pub use manifest::{format_manifest, manifest_line};
pub use scopes::{
    AgentMemoryDir, AgentMemoryScope, AgentMemoryScopes, ScopeError, sanitize_agent_type,
};
pub use store::MemoryStore;
pub use types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryType,
    WriteMode, WriteReport,
};

pub mod session_memory;
