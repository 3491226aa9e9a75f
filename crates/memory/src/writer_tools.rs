//! What the background memory writers (extractor, consolidator) share: their tools, their
//! permission gate, and how the files they wrote are reported.
//!
//! Every write by a background writer goes through the [`MemoryStore`] (validation, containment,
//! secret filter, lock, atomic write, index line): the only write tools the gate lets through are
//! the store-backed ones ([`STORE_WRITE_TOOLS`]). The generic `write_file` / `edit_file`, any other
//! file-writing tool and any shell command that is not read-only are denied outright, whatever
//! tool list the fork was given. `MEMORY.md` is never a write target: the index is only ever
//! changed by the store.

use crate::index::INDEX_FILE;
use crate::memory_store::MemoryStore;
use crate::types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, WriteMode,
    WriteReport,
};
use async_trait::async_trait;
use memloop_core::tool::{
    PermissionDecision, PermissionGate, Tool, ToolCallRequest, ToolContext, ToolEffect,
    ToolRegistry,
};
use memloop_core::tools::{Glob, Grep, ReadFile, Shell};
use std::path::PathBuf;
use std::sync::Arc;

/// The store-backed write tools a background writer may call: `memory_write`,
/// `memory_log_append` (daily-log mode) and `memory_delete` (the consolidator).
pub(crate) const STORE_WRITE_TOOLS: [&str; 3] = [
    crate::tools::MEMORY_WRITE,
    crate::daily_log::MEMORY_LOG_APPEND,
    crate::tools::MEMORY_DELETE,
];

/// The gate of a background memory writer (see the module docs).
struct MemoryWriterGate {
    store: Arc<dyn MemoryStore>,
}

impl MemoryWriterGate {
    fn deny(&self, call: &ToolCallRequest, why: String) -> PermissionDecision {
        tracing::warn!(tool = %call.name, reason = %why, "background memory writer: call denied");
        PermissionDecision::Deny(format!("Permission denied: {why}"))
    }

    fn check_target(&self, target: &std::path::Path) -> Result<(), String> {
        let resolved = self.store.check_contained(target).map_err(|e| {
            crate::safety::warn_refused(&e);
            e.to_string()
        })?;
        if resolved.file_name().is_some_and(|n| n == INDEX_FILE) {
            return Err(format!(
                "{INDEX_FILE} is the index and only the memory store changes it"
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl PermissionGate for MemoryWriterGate {
    async fn check(&self, call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
        match call.effect {
            ToolEffect::ReadOnly => PermissionDecision::Allow,
            ToolEffect::WritesFiles if STORE_WRITE_TOOLS.contains(&call.name.as_str()) => {
                match &call.write_targets {
                    Err(why) => self.deny(call, format!("{} cannot be checked ({why})", call.name)),
                    Ok(targets) if targets.is_empty() => {
                        self.deny(call, format!("{} did not name its target", call.name))
                    }
                    Ok(targets) => match targets.iter().try_for_each(|t| self.check_target(t)) {
                        Ok(()) => PermissionDecision::Allow,
                        Err(why) => self.deny(call, why),
                    },
                }
            }
            ToolEffect::WritesFiles => self.deny(
                call,
                format!(
                    "{} is not available to a background memory writer: save memories only with \
                     `memory_write` (or `memory_log_append` in daily-log mode)",
                    call.name
                ),
            ),
            ToolEffect::Shell => match &call.write_targets {
                Ok(t) if t.is_empty() => PermissionDecision::Allow,
                _ => self.deny(
                    call,
                    format!("{} may only run read-only commands here", call.name),
                ),
            },
            ToolEffect::Other => self.deny(
                call,
                format!(
                    "{} is not available to a background memory writer (only read-only tools and \
                     the memory tools are allowed)",
                    call.name
                ),
            ),
        }
    }
}

/// The gate of a background memory writer: read-only tools and read-only shell commands are
/// allowed; the only writes allowed are the store-backed tools ([`STORE_WRITE_TOOLS`]) with
/// every target inside the memory dir and none of them `MEMORY.md`. Everything else is denied
/// with a reason the model can read.
pub(crate) fn memory_writer_gate(store: &Arc<dyn MemoryStore>) -> Arc<dyn PermissionGate> {
    Arc::new(MemoryWriterGate {
        store: store.clone(),
    })
}

/// The tool set of a background memory writer: `read_file`, `glob`, `grep`, `shell` (read-only
/// commands only, enforced by [`memory_writer_gate`]) plus `extra` (the store-backed memory
/// tools). No generic file-writing tool: writes go through the store.
pub(crate) fn memory_writer_tools(extra: &[Arc<dyn Tool>]) -> ToolRegistry {
    let mut tools = ToolRegistry::new()
        .with(Arc::new(ReadFile::default()))
        .with(Arc::new(Glob::default()))
        .with(Arc::new(Grep::default()))
        .with(Arc::new(Shell::default()));
    for t in extra {
        tools.register(t.clone());
    }
    tools
}

/// A store that counts how the writes through it went, so a background writer can tell "nothing
/// worth saving" from "every write failed" (a read-only memory dir, a held lock): only I/O,
/// lock and backend failures count as failed; refusals (a credential, a bad name) are the
/// store doing its job.
pub(crate) struct TallyStore {
    inner: Arc<dyn MemoryStore>,
    ok: std::sync::atomic::AtomicUsize,
    failed: std::sync::atomic::AtomicUsize,
    last_error: std::sync::Mutex<Option<String>>,
}

impl TallyStore {
    pub(crate) fn new(inner: Arc<dyn MemoryStore>) -> Self {
        Self {
            inner,
            ok: Default::default(),
            failed: Default::default(),
            last_error: Default::default(),
        }
    }

    fn record<T>(&self, r: Result<T, MemoryError>) -> Result<T, MemoryError> {
        use std::sync::atomic::Ordering::Relaxed;
        match &r {
            Ok(_) => {
                self.ok.fetch_add(1, Relaxed);
            }
            Err(
                e @ (MemoryError::Io { .. } | MemoryError::Lock(_) | MemoryError::Backend { .. }),
            ) => {
                self.failed.fetch_add(1, Relaxed);
                if let Ok(mut last) = self.last_error.lock() {
                    *last = Some(e.to_string());
                }
            }
            Err(_) => {}
        }
        r
    }

    /// `Some(error)` when at least one write failed and none succeeded.
    pub(crate) fn all_failed(&self) -> Option<String> {
        use std::sync::atomic::Ordering::Relaxed;
        let (ok, failed) = (self.ok.load(Relaxed), self.failed.load(Relaxed));
        (ok == 0 && failed > 0).then(|| {
            let last = self.last_error.lock().ok().and_then(|l| l.clone());
            format!(
                "all {failed} memory write(s) failed; last error: {}",
                last.unwrap_or_default()
            )
        })
    }
}

#[async_trait]
impl MemoryStore for TallyStore {
    fn root(&self) -> &std::path::Path {
        self.inner.root()
    }
    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        self.inner.scan().await
    }
    async fn read(&self, rel_path: &str) -> Result<MemoryFile, MemoryError> {
        self.inner.read(rel_path).await
    }
    async fn write(
        &self,
        rel_path: &str,
        doc: &MemoryDoc,
        mode: WriteMode,
    ) -> Result<WriteReport, MemoryError> {
        self.record(self.inner.write(rel_path, doc, mode).await)
    }
    async fn delete(&self, rel_path: &str) -> Result<(), MemoryError> {
        self.record(self.inner.delete(rel_path).await)
    }
    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        self.record(self.inner.clear().await)
    }
    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        self.inner.load_index().await
    }
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        self.inner.index_entries().await
    }
    fn check_contained(&self, path: &std::path::Path) -> Result<PathBuf, MemoryError> {
        self.inner.check_contained(path)
    }
}

/// Written files relative to the store's memory dir, `/`-separated, deduplicated, without
/// `MEMORY.md` and without anything outside the dir (what `MemoriesSaved` / `DreamFinished`
/// report).
pub(crate) fn relative_to_memory_dir(store: &dyn MemoryStore, paths: &[PathBuf]) -> Vec<String> {
    let root = crate::memory_store::RootPaths::of(store);
    let mut out: Vec<String> = Vec::new();
    for p in paths {
        if let Some(rel) = root.relative(store, p) {
            if rel != INDEX_FILE && !out.contains(&rel) {
                out.push(rel);
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::file_store::FileMemoryStore;
    use memloop_core::tool::ToolCallRequest;

    fn call(name: &str, effect: ToolEffect, targets: Vec<PathBuf>) -> ToolCallRequest {
        ToolCallRequest {
            name: name.into(),
            input: serde_json::json!({}),
            effect,
            write_targets: Ok(targets),
        }
    }

    /// Even when a fork is handed the parent's exact tool list, the gate lets writes through
    /// only via the store-backed tools, and never to MEMORY.md.
    #[tokio::test]
    async fn gate_denies_generic_writes_and_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(dir.path()).unwrap());
        let gate = memory_writer_gate(&store);
        let ctx = ToolContext {
            session_id: "s".into(),
            cwd: dir.path().to_path_buf(),
            agent: memloop_core::tool::AgentKind::Main,
            cancel: memloop_core::CancellationToken::new(),
        };
        let inside = dir.path().join("a.md");
        let index = dir.path().join("MEMORY.md");
        let allowed = |d: PermissionDecision| d == PermissionDecision::Allow;
        for name in ["write_file", "edit_file", "apply_patch"] {
            let c = call(name, ToolEffect::WritesFiles, vec![inside.clone()]);
            assert!(!allowed(gate.check(&c, &ctx).await), "{name}");
        }
        let c = call(
            "memory_write",
            ToolEffect::WritesFiles,
            vec![inside.clone()],
        );
        assert!(allowed(gate.check(&c, &ctx).await));
        let c = call("memory_write", ToolEffect::WritesFiles, vec![index]);
        assert!(!allowed(gate.check(&c, &ctx).await));
        let c = call("memory_write", ToolEffect::WritesFiles, vec![]);
        assert!(!allowed(gate.check(&c, &ctx).await));
        let c = call("shell", ToolEffect::Shell, vec![inside]);
        assert!(!allowed(gate.check(&c, &ctx).await));
        let c = call("shell", ToolEffect::Shell, vec![]);
        assert!(allowed(gate.check(&c, &ctx).await));
        let c = call("read_file", ToolEffect::ReadOnly, vec![]);
        assert!(allowed(gate.check(&c, &ctx).await));
        let c = call("web_fetch", ToolEffect::Other, vec![]);
        assert!(!allowed(gate.check(&c, &ctx).await));
    }
}
