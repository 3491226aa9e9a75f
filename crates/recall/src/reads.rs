//! Which memory files the model already read in full this session (so recall does not surface
//! them again): successful `memory_read` calls, and whole-file reads of paths inside the memory
//! dir by the host's file-read tools.

use memloop_core::message::{ContentBlock, Message};
use memloop_host::paths::resolve_path;
use memloop_store::MemoryStore;
use memloop_store::read_target_to_rel_path;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Tool names recall inspects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadTools {
    /// The memory read tool (input `{"topic": ...}`). Default `memory_read`.
    pub memory_read: String,
    /// File-read tools (input `file_path` or `path`; a call with `offset` or `limit` is a partial
    /// read and does not count). Default `Read`, `read_file`, `file_read`.
    pub file_read: Vec<String>,
}

impl Default for ReadTools {
    fn default() -> Self {
        Self {
            memory_read: "memory_read".into(),
            file_read: vec!["Read".into(), "read_file".into(), "file_read".into()],
        }
    }
}

/// Relative paths (as the store names them) that successful tool calls in `messages` read in
/// full. `known` says which paths are memories. `memory_read` topics map through
/// [`topic_to_rel_path`](memloop_store::topic_to_rel_path) (or are store paths); file-read paths are resolved against `cwd` (as the file tools do) and
/// mapped through the store's containment gate, so relative paths and paths through a
/// symlinked memory dir count too.
pub fn read_in_full(
    messages: &[Message],
    store: &dyn MemoryStore,
    cwd: &Path,
    tools: &ReadTools,
    known: &dyn Fn(&str) -> bool,
) -> HashSet<String> {
    let mut failed: HashMap<&str, bool> = HashMap::new();
    for m in messages {
        for b in &m.content {
            if let ContentBlock::ToolResult {
                tool_use_id,
                is_error,
                ..
            } = b
            {
                failed.insert(tool_use_id.as_str(), *is_error);
            }
        }
    }
    let mut out = HashSet::new();
    for m in messages {
        for (id, name, input) in m.tool_uses() {
            if failed.get(id) != Some(&false) {
                continue;
            }
            let candidate = if name == tools.memory_read {
                input
                    .get("topic")
                    .and_then(|t| t.as_str())
                    .and_then(|t| read_target_to_rel_path(t).ok())
            } else if tools.file_read.iter().any(|t| t == name) {
                whole_file_path(input, cwd)
                    .and_then(|abs| store.memory_path_of(&abs).ok())
                    .map(|p| p.as_str().to_owned())
            } else {
                None
            };
            if let Some(rel) = candidate.filter(|c| known(c.as_str())) {
                out.insert(rel);
            }
        }
    }
    out
}

/// The absolute path of a whole-file read (`None` for a partial read with `offset`/`limit`).
fn whole_file_path(input: &serde_json::Value, cwd: &Path) -> Option<PathBuf> {
    if input.get("offset").is_some() || input.get("limit").is_some() {
        return None;
    }
    let path = input
        .get("file_path")
        .or_else(|| input.get("path"))
        .and_then(|p| p.as_str())?;
    Some(resolve_path(cwd, path))
}
