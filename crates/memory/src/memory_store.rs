//! The [`MemoryStore`] trait: everything the rest of memloop needs from a memory dir.
//!
//! The embedded default is `FileMemoryStore` (Markdown files plus a `MEMORY.md` index, in Claude
//! Code's format). Other backends implement the same trait; selectors, recall, extraction and the
//! memory tools only see `Arc<dyn MemoryStore>`.

use crate::types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, WriteMode,
    WriteReport,
};
use async_trait::async_trait;
use std::path::{Path, PathBuf};

/// A project's memories. Object-safe; share it as `Arc<dyn MemoryStore>`.
///
/// Contract:
/// - paths are relative to [`root`](Self::root), `/`-separated, and validated by the store (no
///   `..`, no absolute paths, no NUL, no leading `.` segment; `.md` files only);
/// - [`write`](Self::write) is atomic and updates the index line in the same locked operation;
///   it refuses content that looks like a credential ([`MemoryError::SensitiveData`]);
/// - [`scan`](Self::scan) lists every memory (newest first) and never fails because of one bad
///   file: text that is not valid UTF-8 is read lossily and binary or unreadable files are
///   skipped, each with a `tracing` warning; every memory it lists can be [`read`](Self::read)
///   (a very large one is returned cut, with a note).
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// The memory dir (absolute).
    fn root(&self) -> &Path;

    /// Headers of all memory files (all `*.md` except `MEMORY.md`), newest first.
    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError>;

    /// Read one memory.
    async fn read(&self, rel_path: &str) -> Result<MemoryFile, MemoryError>;

    /// Write a memory and its index line (atomic, locked, secret-checked).
    async fn write(
        &self,
        rel_path: &str,
        doc: &MemoryDoc,
        mode: WriteMode,
    ) -> Result<WriteReport, MemoryError>;

    /// Delete a memory and its index line.
    async fn delete(&self, rel_path: &str) -> Result<(), MemoryError>;

    /// Delete every memory and the index itself (`memloop memory clear`). Returns the relative
    /// paths of the memories deleted. Index lines that name no valid memory file are dropped
    /// with the index.
    async fn clear(&self) -> Result<Vec<String>, MemoryError>;

    /// `MEMORY.md` with the session-load caps applied (200 lines / 25,000 bytes + warning).
    async fn load_index(&self) -> Result<LoadedIndex, MemoryError>;

    /// The parsed index entries (all of them, no caps).
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError>;

    /// The single write-containment gate: `Ok(resolved)` when `path` (absolute, or relative to the
    /// root) is inside the memory dir after normalisation and symlink resolution. A question,
    /// not a refusal: implementations log nothing here (callers that refuse a write log it).
    fn check_contained(&self, path: &Path) -> Result<PathBuf, MemoryError>;
}

/// Where a store's memory dir lives on disk, for mapping paths back to store-relative ones.
#[derive(Debug, Clone)]
pub(crate) struct RootPaths {
    root: PathBuf,
    canonical: PathBuf,
}

impl RootPaths {
    /// The root of `store`, as given and canonicalised once.
    pub(crate) fn of(store: &dyn MemoryStore) -> Self {
        let root = store.root().to_path_buf();
        let canonical = std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone());
        Self { root, canonical }
    }

    /// `path` (absolute) relative to the memory dir, `/`-separated, when the store's containment
    /// gate accepts it (symlinks resolved, so a path through a symlinked root maps too).
    pub(crate) fn relative(&self, store: &dyn MemoryStore, path: &Path) -> Option<String> {
        let resolved = store.check_contained(path).ok()?;
        let strip = |p: &Path, r: &Path| {
            let s = p.strip_prefix(r).ok()?.to_string_lossy().replace('\\', "/");
            (!s.is_empty()).then_some(s)
        };
        strip(&resolved, &self.canonical)
            .or_else(|| strip(path, &self.root))
            .or_else(|| strip(&resolved, &self.root))
    }
}
