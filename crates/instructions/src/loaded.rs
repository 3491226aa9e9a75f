//! What a load produces, and the per-load inputs.

use super::report::{InstructionKind, LoadReport};
use std::path::PathBuf;

/// The memory index text, handed in by the caller (e.g. from `MemoryStore::load_index`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryIndexText {
    /// Where it comes from (shown in the prompt and the report).
    pub path: PathBuf,
    /// The index content.
    pub content: String,
}

/// Per-load inputs.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Files the agent touched (absolute, or relative to the working dir), for conditional rules.
    pub touched_files: Vec<PathBuf>,
    /// The memory index, loaded last.
    pub memory_index: Option<MemoryIndexText>,
}

/// One loaded instruction file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstructionFile {
    /// Its path.
    pub path: PathBuf,
    /// Its kind (imports carry their root's kind).
    pub kind: InstructionKind,
    /// Import depth (0 = top level).
    pub depth: usize,
    /// The file that imported it.
    pub imported_from: Option<PathBuf>,
    /// The content: frontmatter and block HTML comments removed, `@path` lines kept.
    pub content: String,
}

/// The result of a load: files in precedence order (later wins) and the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Instructions {
    /// The loaded files, in order; an importing file comes right before what it imports.
    pub files: Vec<InstructionFile>,
    /// Everything considered, loaded or skipped.
    pub report: LoadReport,
}
