//! What the background memory writers (extractor, consolidator) share: their permission gate,
//! and how the files they wrote are reported.
//!
//! A writer fork declares the tools of the agent it forks from, unchanged (so its requests share
//! that agent's cached prompt prefix); what it may do is decided here, by its gate. Every write
//! goes through the [`MemoryStore`] (validation, containment, secret filter, lock, atomic write,
//! index line): the only write tools the gate lets through are the store-backed ones the writer
//! needs ([`EXTRACTOR_WRITES`], [`CONSOLIDATOR_WRITES`]). The generic `write_file` / `edit_file`,
//! any other file-writing tool and any shell command that is not read-only are denied outright,
//! whatever tools the parent declares. `MEMORY.md` is never a write target: the index is only
//! ever changed by the store.

use async_trait::async_trait;
use memloop_core::AgentError;
use memloop_core::fork::ForkedAgentBuilder;
use memloop_core::tool::{
    PermissionDecision, PermissionGate, Tool, ToolCallRequest, ToolContext, ToolEffect,
};
use memloop_store::INDEX_FILE;
use memloop_store::{
    CheckedWrite, LocalDir, LocalPurpose, MemoryPath, MemoryStore, StoreDescription, WriteLimits,
};
use memloop_store::{IndexEntry, LoadedIndex, MemoryError, MemoryFile, MemoryHeader, WriteReport};
use std::path::PathBuf;
use std::sync::Arc;

/// Why a background memory writer (the extractor or the consolidator) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriterError {
    /// The forked agent failed (model error, cancellation, ...).
    #[error("forked agent failed: {0}")]
    Agent(#[from] AgentError),
    /// The memory store failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// Any other failure (of a custom extractor, say).
    #[error("extraction failed: {0}")]
    Failed(String),
}

/// The store-backed writes of the extractor: `memory_write`, and `memory_log_append` in
/// daily-log mode. It never deletes.
pub(crate) const EXTRACTOR_WRITES: &[&str] = &[
    crate::tools::MEMORY_WRITE,
    crate::daily_log::MEMORY_LOG_APPEND,
];

/// The store-backed writes of the consolidator: `memory_write` and `memory_delete`.
pub(crate) const CONSOLIDATOR_WRITES: &[&str] =
    &[crate::tools::MEMORY_WRITE, crate::tools::MEMORY_DELETE];

/// The gate of a background memory writer (see the module docs).
struct MemoryWriterGate {
    store: Arc<dyn MemoryStore>,
    writes: &'static [&'static str],
}

impl MemoryWriterGate {
    fn deny(&self, call: &ToolCallRequest, why: String) -> PermissionDecision {
        tracing::warn!(tool = %call.name, reason = %why, "background memory writer: call denied");
        PermissionDecision::Deny(format!("Permission denied: {why}"))
    }

    fn check_target(&self, target: &std::path::Path) -> Result<(), String> {
        if target.file_name().is_some_and(|n| n == INDEX_FILE) {
            return Err(format!(
                "{INDEX_FILE} is the index and only the memory store changes it"
            ));
        }
        self.store.memory_path_of(target).map_err(|e| {
            memloop_files::warn_refused(&e);
            e.to_string()
        })?;
        Ok(())
    }
}

#[async_trait]
impl PermissionGate for MemoryWriterGate {
    async fn check(&self, call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
        match call.effect {
            ToolEffect::ReadOnly => PermissionDecision::Allow,
            ToolEffect::WritesFiles if self.writes.contains(&call.name.as_str()) => {
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
                    "{} is not available to this background memory writer: it may write only \
                     with {}",
                    call.name,
                    self.writes
                        .iter()
                        .map(|w| format!("`{w}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
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
/// allowed; the only writes allowed are the store-backed tools in `writes` with every target
/// inside the memory dir and none of them `MEMORY.md`. Everything else is denied with a reason
/// the model can read.
pub(crate) fn memory_writer_gate(
    store: &Arc<dyn MemoryStore>,
    writes: &'static [&'static str],
) -> Arc<dyn PermissionGate> {
    Arc::new(MemoryWriterGate {
        store: store.clone(),
        writes,
    })
}

/// Bind a writer's own tools on its fork: a tool the parent declares with the same spec keeps
/// the parent's declaration (only the implementation is the writer's, e.g. bound to a tallying
/// store), so the request prefix stays the parent's; a tool the parent lacks is added, which
/// costs the parent's cached prefix (see [`ForkedAgentBuilder::tool`]).
pub(crate) fn bind_tools(
    mut fork: ForkedAgentBuilder,
    tools: impl IntoIterator<Item = Arc<dyn Tool>>,
) -> ForkedAgentBuilder {
    for tool in tools {
        fork = fork.tool(tool);
    }
    fork
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
    fn describe(&self) -> StoreDescription {
        self.inner.describe()
    }
    fn local_dir(&self, purpose: LocalPurpose) -> LocalDir {
        self.inner.local_dir(purpose)
    }
    fn write_limits(&self) -> WriteLimits {
        self.inner.write_limits()
    }
    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        self.inner.scan().await
    }
    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        self.inner.read_path(path).await
    }
    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        self.record(self.inner.write_checked(write).await)
    }
    /// Forwarded, so a conditional write stays the wrapped store's one atomic step.
    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &memloop_store::ExpectedVersion,
    ) -> Result<memloop_store::VersionedWrite, MemoryError> {
        self.record(self.inner.write_checked_if(write, expected).await)
    }
    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        self.record(self.inner.delete_checked(path).await)
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
    fn check_contained(&self, rel: &str) -> Result<MemoryPath, MemoryError> {
        self.inner.check_contained(rel)
    }
}

/// Written files relative to the store's memory dir, `/`-separated, deduplicated, without
/// `MEMORY.md` and without anything outside the dir (what `MemoriesSaved` / `DreamFinished`
/// report).
pub(crate) fn relative_to_memory_dir(store: &dyn MemoryStore, paths: &[PathBuf]) -> Vec<String> {
    memory_paths_of(store, paths)
        .into_iter()
        .map(MemoryPath::into_string)
        .collect()
}

/// The memories of `store` that the written files `paths` (as a fork's tools report them:
/// absolute files of a directory store, memory paths of other stores) name, in order,
/// deduplicated; a file that names no memory of the store (`MEMORY.md`, outside the dir) is
/// left out.
pub(crate) fn memory_paths_of(store: &dyn MemoryStore, paths: &[PathBuf]) -> Vec<MemoryPath> {
    let mut out: Vec<MemoryPath> = Vec::new();
    for p in paths {
        if let Ok(rel) = store.memory_path_of(p) {
            if !out.contains(&rel) {
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
    use memloop_core::tool::ToolCallRequest;
    use memloop_files::FileMemoryStore;

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
        let gate = memory_writer_gate(&store, EXTRACTOR_WRITES);
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
        let c = call("shell", ToolEffect::Shell, vec![inside.clone()]);
        assert!(!allowed(gate.check(&c, &ctx).await));
        let c = call("shell", ToolEffect::Shell, vec![]);
        assert!(allowed(gate.check(&c, &ctx).await));
        let c = call("read_file", ToolEffect::ReadOnly, vec![]);
        assert!(allowed(gate.check(&c, &ctx).await));
        let c = call("web_fetch", ToolEffect::Other, vec![]);
        assert!(!allowed(gate.check(&c, &ctx).await));
        // The extractor never deletes; the consolidator may, inside the memory dir only.
        let delete = call(
            "memory_delete",
            ToolEffect::WritesFiles,
            vec![inside.clone()],
        );
        assert!(!allowed(gate.check(&delete, &ctx).await));
        let consolidator = memory_writer_gate(&store, CONSOLIDATOR_WRITES);
        assert!(allowed(consolidator.check(&delete, &ctx).await));
        let outside = call(
            "memory_delete",
            ToolEffect::WritesFiles,
            vec![dir.path().join("../x.md")],
        );
        assert!(!allowed(consolidator.check(&outside, &ctx).await));
        let log = call("memory_log_append", ToolEffect::WritesFiles, vec![inside]);
        assert!(!allowed(consolidator.check(&log, &ctx).await));
    }
}
