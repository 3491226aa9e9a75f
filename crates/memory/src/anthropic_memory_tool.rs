//! [`AnthropicMemoryTool`]: Anthropic's client-side memory tool (`memory_20250818`: `view`,
//! `create`, `str_replace`, `insert`, `delete`, `rename` over `/memories`) executed on a
//! [`MemoryStore`].
//!
//! `/memories/<rel>` maps to `<rel>` in the store, unchanged: a memory file is accepted exactly
//! when the store's one path grammar ([`MemoryPath::new`]) accepts `<rel>` (no `..`, no
//! absolute path, no `\`, NUL or control character, no hidden or empty segment, segments of at
//! most 200 characters, `.md` files only), so a hostile path gets the store's answer and error.
//! Every path then passes the store's containment gate (symlinks resolved: a link leading
//! outside the memory dir is refused); every write goes through `MemoryStore::write` (atomic,
//! locked, secret-filtered, index line kept in step), a rename through `MemoryStore::rename`.
//! `/memories/MEMORY.md` is the index: viewable, never written directly.

use async_trait::async_trait;
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_store::MemoryStore;
use memloop_store::{MemoryDoc, MemoryError, WriteMode};
use memloop_store::{MemoryPath, validate_topic};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// The tool name the Anthropic API uses for the memory tool.
pub const ANTHROPIC_MEMORY_TOOL: &str = "memory";
/// The Anthropic API tool type to declare (`{"type": "memory_20250818", "name": "memory"}`).
pub const ANTHROPIC_MEMORY_TOOL_TYPE: &str = "memory_20250818";
/// The virtual root every path starts with.
pub const MEMORIES_ROOT: &str = "/memories";

/// Anthropic's memory tool command set over a [`MemoryStore`]. Register it as a memloop
/// [`Tool`]; a host calling the Anthropic API directly declares
/// `{"type": "memory_20250818", "name": "memory"}` and passes each `tool_use` input to
/// [`Tool::call`].
#[derive(Clone)]
pub struct AnthropicMemoryTool {
    store: Arc<dyn MemoryStore>,
}

impl AnthropicMemoryTool {
    /// The tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
enum Command {
    View {
        path: String,
        #[serde(default)]
        view_range: Option<[i64; 2]>,
    },
    Create {
        path: String,
        file_text: String,
    },
    StrReplace {
        path: String,
        old_str: String,
        #[serde(default)]
        new_str: String,
    },
    Insert {
        path: String,
        insert_line: usize,
        insert_text: String,
    },
    Delete {
        path: String,
    },
    Rename {
        old_path: String,
        new_path: String,
    },
}

/// What a `/memories/...` path names.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A directory (`""` is the root), as a prefix ending in `/` (or empty).
    Dir(String),
    /// The index.
    Index,
    /// A memory file.
    File(String),
}

/// Map a tool path onto the store: `/memories` (or `/memories/`) is the root, and
/// `/memories/<rel>` names `<rel>` in the store's one path grammar, with no rewriting: one `/`
/// after the root and nothing else stripped, so `/memories//etc/passwd.md` is the absolute
/// `/etc/passwd.md` and refused, as the store refuses it.
///
/// - `MEMORY.md` is the index;
/// - a path ending in `.md` is a memory file, accepted exactly when [`MemoryPath::new`]
///   (the store's [`validate_rel_path`](memloop_store::validate_rel_path)) accepts it, with
///   the store's error otherwise;
/// - anything else is a directory (one trailing `/` allowed) whose every segment is a name the
///   store accepts as a path segment ([`validate_topic`]).
fn target(path: &str) -> Result<Target, String> {
    let rest = path
        .strip_prefix(MEMORIES_ROOT)
        .filter(|r| r.is_empty() || r.starts_with('/'))
        .ok_or_else(|| {
            format!(
                "`{}` is outside {MEMORIES_ROOT}: every path must start with {MEMORIES_ROOT}/",
                memloop_store::printable(path)
            )
        })?;
    let rel = rest.strip_prefix('/').unwrap_or(rest);
    if rel.is_empty() {
        return Ok(Target::Dir(String::new()));
    }
    if rel == memloop_store::INDEX_FILE {
        return Ok(Target::Index);
    }
    if rel.ends_with(".md") {
        let memory = MemoryPath::new(rel).map_err(|e| e.to_string())?;
        return Ok(Target::File(memory.into_string()));
    }
    let dir = rel.strip_suffix('/').unwrap_or(rel);
    for seg in dir.split('/') {
        validate_topic(seg).map_err(|e| format!("`{}`: {e}", memloop_store::printable(path)))?;
    }
    Ok(Target::Dir(format!("{dir}/")))
}

fn file_target(path: &str) -> Result<String, String> {
    match target(path)? {
        Target::File(rel) => Ok(rel),
        Target::Index => Err(format!(
            "{path} is the index; the store keeps it in step with the memory files, edit those instead"
        )),
        Target::Dir(_) => Err(format!(
            "`{path}` is not a memory file: memory files end in `.md`"
        )),
    }
}

/// The document for `text` at `rel`: a full memory file (frontmatter) is parsed; plain text
/// becomes the body, named after the file, described by its first line.
fn doc_from_text(rel: &str, text: &str) -> Result<MemoryDoc, String> {
    let stem = memloop_store::file_stem(rel);
    if text.trim_start().starts_with("---") {
        return MemoryDoc::parse(text, stem);
    }
    let first = text
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or(stem);
    Ok(MemoryDoc::new(
        stem,
        first.chars().take(150).collect::<String>(),
        None,
        text,
    ))
}

fn numbered(text: &str, from: usize) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}", i + from))
        .collect::<Vec<_>>()
        .join("\n")
}

impl AnthropicMemoryTool {
    /// Refuse a path the containment gate does not accept (symlink escapes included).
    fn contained(&self, rel: &str) -> Result<PathBuf, String> {
        self.store.write_target(rel).map_err(|e| e.to_string())
    }

    async fn read_raw(&self, rel: &str) -> Result<String, String> {
        self.contained(rel)?;
        match self.store.read(rel).await {
            Ok(f) => Ok(f.raw),
            Err(MemoryError::NotFound(_)) => Err(format!("{MEMORIES_ROOT}/{rel} does not exist")),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn write_text(&self, rel: &str, text: &str) -> Result<PathBuf, String> {
        let path = self.contained(rel)?;
        let doc = doc_from_text(rel, text)?;
        self.store
            .write(rel, &doc, WriteMode::Overwrite)
            .await
            .map_err(|e| e.to_string())?;
        Ok(path)
    }

    async fn view(&self, path: &str, range: Option<[i64; 2]>) -> Result<String, String> {
        match target(path)? {
            Target::Dir(prefix) => {
                let headers = self.store.scan().await.map_err(|e| e.to_string())?;
                let mut lines: Vec<String> = headers
                    .iter()
                    .filter(|h| h.rel_path.starts_with(&prefix))
                    .map(|h| format!("{MEMORIES_ROOT}/{}", h.rel_path))
                    .collect();
                if lines.is_empty() && !prefix.is_empty() {
                    return Err(format!("{path} does not exist"));
                }
                lines.sort();
                if prefix.is_empty() {
                    lines.insert(0, format!("{MEMORIES_ROOT}/{}", memloop_store::INDEX_FILE));
                }
                Ok(format!(
                    "Files in {}:\n{}",
                    path.trim_end_matches('/'),
                    lines.join("\n")
                ))
            }
            Target::Index => {
                let ix = self.store.load_index().await.map_err(|e| e.to_string())?;
                Ok(format!(
                    "Here's the content of {path} with line numbers:\n{}",
                    numbered(&ix.content, 1)
                ))
            }
            Target::File(rel) => {
                let raw = self.read_raw(&rel).await?;
                let lines: Vec<&str> = raw.lines().collect();
                let (start, end) = match range {
                    None => (1, lines.len()),
                    Some([s, e]) => {
                        let end = if e == -1 { lines.len() as i64 } else { e };
                        if s < 1 || end < s || end as usize > lines.len() {
                            return Err(format!(
                                "invalid view_range [{s}, {e}]: the file has {} lines",
                                lines.len()
                            ));
                        }
                        (s as usize, end as usize)
                    }
                };
                let shown = lines
                    .get(start.saturating_sub(1)..end)
                    .unwrap_or(&[])
                    .join("\n");
                Ok(format!(
                    "Here's the content of {path} with line numbers:\n{}",
                    numbered(&shown, start)
                ))
            }
        }
    }

    async fn run(&self, cmd: Command, written: &mut Vec<PathBuf>) -> Result<String, String> {
        match cmd {
            Command::View { path, view_range } => self.view(&path, view_range).await,
            Command::Create { path, file_text } => {
                let rel = file_target(&path)?;
                written.push(self.write_text(&rel, &file_text).await?);
                Ok(format!("File created successfully at: {path}"))
            }
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => {
                let rel = file_target(&path)?;
                let raw = self.read_raw(&rel).await?;
                match raw.matches(&old_str).count() {
                    0 => {
                        return Err(format!(
                            "No replacement was performed: old_str did not appear verbatim in {path}."
                        ));
                    }
                    1 => {}
                    n => {
                        return Err(format!(
                            "No replacement was performed: old_str appears {n} times in {path}; make it unique."
                        ));
                    }
                }
                written.push(
                    self.write_text(&rel, &raw.replacen(&old_str, &new_str, 1))
                        .await?,
                );
                Ok(format!("The memory file {path} has been edited."))
            }
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => {
                let rel = file_target(&path)?;
                let raw = self.read_raw(&rel).await?;
                let mut lines: Vec<&str> = raw.lines().collect();
                if insert_line > lines.len() {
                    return Err(format!(
                        "invalid insert_line {insert_line}: the file has {} lines",
                        lines.len()
                    ));
                }
                let text = insert_text.trim_end_matches('\n');
                lines.insert(insert_line, text);
                let mut new = lines.join("\n");
                new.push('\n');
                written.push(self.write_text(&rel, &new).await?);
                Ok(format!("The memory file {path} has been edited."))
            }
            Command::Delete { path } => match target(&path)? {
                Target::File(rel) => {
                    self.contained(&rel)?;
                    self.store.delete(&rel).await.map_err(|e| e.to_string())?;
                    Ok(format!("Successfully deleted {path}"))
                }
                Target::Index => Err(format!("{path} is the index and cannot be deleted")),
                Target::Dir(prefix) if prefix.is_empty() => {
                    Err(format!("refusing to delete all of {MEMORIES_ROOT}"))
                }
                Target::Dir(prefix) => {
                    let headers = self.store.scan().await.map_err(|e| e.to_string())?;
                    let mut n = 0;
                    for h in headers.iter().filter(|h| h.rel_path.starts_with(&prefix)) {
                        self.contained(&h.rel_path)?;
                        self.store
                            .delete(&h.rel_path)
                            .await
                            .map_err(|e| e.to_string())?;
                        n += 1;
                    }
                    if n == 0 {
                        return Err(format!("{path} does not exist"));
                    }
                    Ok(format!("Successfully deleted {path} ({n} files)"))
                }
            },
            Command::Rename { old_path, new_path } => {
                let (from, to) = (file_target(&old_path)?, file_target(&new_path)?);
                self.contained(&from)?;
                let to_file = self.contained(&to)?;
                if self.store.read(&to).await.is_ok() {
                    return Err(format!("{new_path} already exists"));
                }
                // One step on the store (a `rename(2)` on the file store): never a copy left
                // behind, never the memory lost between a write and a delete.
                self.store
                    .rename(&from, &to)
                    .await
                    .map_err(|e| e.to_string())?;
                written.push(to_file);
                Ok(format!("Successfully renamed {old_path} to {new_path}"))
            }
        }
    }
}

fn target_paths(cmd: &Command) -> Vec<&str> {
    match cmd {
        Command::View { .. } | Command::Delete { .. } => Vec::new(),
        Command::Create { path, .. }
        | Command::StrReplace { path, .. }
        | Command::Insert { path, .. } => vec![path],
        Command::Rename { new_path, .. } => vec![new_path],
    }
}

#[async_trait]
impl Tool for AnthropicMemoryTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: ANTHROPIC_MEMORY_TOOL.into(),
            description: "Your persistent memory directory /memories. Commands: view (a \
                directory listing or a file with line numbers, optional view_range), create, \
                str_replace, insert, delete, rename. Memory files end in `.md`; \
                /memories/MEMORY.md is the index, kept up to date for you. Never store secrets."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "delete", "rename"]},
                    "path": {"type": "string", "description": "e.g. /memories/project_notes.md"},
                    "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
                    "file_text": {"type": "string"},
                    "old_str": {"type": "string"},
                    "new_str": {"type": "string"},
                    "insert_line": {"type": "integer", "minimum": 0},
                    "insert_text": {"type": "string"},
                    "old_path": {"type": "string"},
                    "new_path": {"type": "string"}
                },
                "required": ["command"]
            }),
            effect: ToolEffect::WritesFiles,
        }
    }

    fn write_targets(&self, input: &Value, _ctx: &ToolContext) -> Result<Vec<PathBuf>, String> {
        let cmd: Command = serde_json::from_value(input.clone())
            .map_err(|e| format!("{ANTHROPIC_MEMORY_TOOL}: invalid input: {e}"))?;
        target_paths(&cmd)
            .into_iter()
            .map(|p| self.contained(&file_target(p)?))
            .collect()
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> ToolOutput {
        let cmd: Command = match serde_json::from_value(input) {
            Ok(c) => c,
            Err(e) => {
                return ToolOutput::error(format!("{ANTHROPIC_MEMORY_TOOL}: invalid input: {e}"));
            }
        };
        let mut written = Vec::new();
        match self.run(cmd, &mut written).await {
            Ok(text) => {
                let mut out = ToolOutput::ok(text);
                out.files_written = written;
                out
            }
            Err(e) => {
                tracing::info!(error = %e, "memory tool command refused");
                ToolOutput::error(e)
            }
        }
    }
}
