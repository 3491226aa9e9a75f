//! # memloop-memory
//!
//! Persistent, file-based memory for memloop agents: the memory dir on disk (`MEMORY.md` index +
//! typed topic files, compatible with Claude Code's format), the [`MemoryStore`] trait and its
//! file implementation, selectors and recall, background extraction, session notes,
//! consolidation, and project-instruction loading.
#![warn(missing_docs)]

mod manifest;
pub mod recall;
mod store;
mod types;

pub use manifest::{format_manifest, manifest_line};
pub use store::MemoryStore;
pub use types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryType,
    WriteMode, WriteReport,
};
