//! Which memory files the model already read in full this session (so recall does not surface
//! them again): successful `memory_read` calls, and whole-file reads of paths inside the memory
//! dir by the host's file-read tools.

use memloop_core::{ContentBlock, Message};
use std::collections::{HashMap, HashSet};
use std::path::Path;

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
/// full. `known` is the set of memory paths; topics are matched with or without `.md`.
pub fn read_in_full(
    messages: &[Message],
    root: &Path,
    tools: &ReadTools,
    known: &HashSet<&str>,
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
                    .map(str::to_owned)
            } else if tools.file_read.iter().any(|t| t == name) {
                whole_file_path(input, root)
            } else {
                None
            };
            if let Some(rel) = candidate.and_then(|c| match_known(&c, known)) {
                out.insert(rel);
            }
        }
    }
    out
}

fn whole_file_path(input: &serde_json::Value, root: &Path) -> Option<String> {
    if input.get("offset").is_some() || input.get("limit").is_some() {
        return None;
    }
    let path = input
        .get("file_path")
        .or_else(|| input.get("path"))
        .and_then(|p| p.as_str())?;
    let rel = Path::new(path).strip_prefix(root).ok()?;
    Some(rel.to_string_lossy().replace('\\', "/"))
}

fn match_known(candidate: &str, known: &HashSet<&str>) -> Option<String> {
    let c = candidate.trim().trim_start_matches("./");
    let with_md = format!("{c}.md");
    [c, with_md.as_str()]
        .into_iter()
        .find(|p| known.contains(p))
        .map(str::to_owned)
}
