//! What the background memory writers (extractor, consolidator) share: their tools, their
//! permission gate (read-only tools freely, read-only shell, writes only inside the memory dir),
//! and how the files they wrote are reported.

use crate::memory_store::MemoryStore;
use memloop_core::tool::{PermissionGate, Tool, ToolRegistry, WriteScopeGate};
use memloop_core::tools::{EditFile, Glob, Grep, ReadFile, Shell, WriteFile};
use std::path::PathBuf;
use std::sync::Arc;

/// The gate of a background memory writer: read-only tools are allowed, shell commands only when
/// the shell tool classifies them as read-only, and file writes only when every target passes
/// the store's containment gate ([`MemoryStore::check_contained`]). Everything else is denied
/// with a reason the model can read.
pub(crate) fn memory_writer_gate(store: &Arc<dyn MemoryStore>) -> Arc<dyn PermissionGate> {
    let store = store.clone();
    Arc::new(
        WriteScopeGate::new(move |p| {
            store.check_contained(p).map(|_| ()).map_err(|e| {
                crate::safety::warn_refused(&e);
                e.to_string()
            })
        })
        .allow_read_only_shell(true),
    )
}

/// The tool set of a background memory writer: `read_file`, `glob`, `grep`, `shell` (read-only
/// commands only, enforced by [`memory_writer_gate`]), `write_file`, `edit_file`, plus `extra`
/// (the memory tools).
pub(crate) fn memory_writer_tools(extra: &[Arc<dyn Tool>]) -> ToolRegistry {
    let mut tools = ToolRegistry::new()
        .with(Arc::new(ReadFile::default()))
        .with(Arc::new(Glob::default()))
        .with(Arc::new(Grep::default()))
        .with(Arc::new(Shell::default()))
        .with(Arc::new(WriteFile))
        .with(Arc::new(EditFile));
    for t in extra {
        tools.register(t.clone());
    }
    tools
}

/// Written files relative to the store's memory dir, `/`-separated, deduplicated, without
/// `MEMORY.md` and without anything outside the dir (what `MemoriesSaved` / `DreamFinished`
/// report).
pub(crate) fn relative_to_memory_dir(store: &dyn MemoryStore, paths: &[PathBuf]) -> Vec<String> {
    let root = crate::memory_store::RootPaths::of(store);
    let mut out: Vec<String> = Vec::new();
    for p in paths {
        if let Some(rel) = root.relative(store, p) {
            if rel != "MEMORY.md" && !out.contains(&rel) {
                out.push(rel);
            }
        }
    }
    out
}
