//! The agent's memory tools: `memory_read`, `memory_write` and `memory_delete`. They take topic
//! names or listed paths, never file-system paths, and go through the store (validation, containment gate, secret filter, atomic locked
//! write + index line). [`AnthropicMemoryTool`] is Anthropic's `memory_20250818` command set
//! (`view`, `create`, `str_replace`, `insert`, `delete`, `rename` over `/memories`) on the same
//! store.

pub use crate::anthropic_memory_tool::{
    ANTHROPIC_MEMORY_TOOL, ANTHROPIC_MEMORY_TOOL_TYPE, AnthropicMemoryTool,
};

use async_trait::async_trait;
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_store::MemoryStore;
use memloop_store::format_manifest;
use memloop_store::{MemoryDoc, MemoryType, WriteMode};
use memloop_store::{read_target_to_rel_path, topic_to_rel_path};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// Name of the read tool.
pub const MEMORY_READ: &str = "memory_read";
/// Name of the write tool.
pub const MEMORY_WRITE: &str = "memory_write";
/// Name of the delete tool (a memory and its index line, through the store).
pub const MEMORY_DELETE: &str = "memory_delete";
/// Topic that reads the index.
pub(crate) const INDEX_TOPIC: &str = "MEMORY";
/// Topic that lists all memories (the manifest).
pub(crate) const LIST_TOPIC: &str = "_list";

/// The three memory tools over one store: read, write, delete. The background writers (extractor,
/// consolidator) declare the same tools as the agent they fork from, so registering these on the
/// main agent keeps their requests on the agent's cached prompt prefix.
pub fn memory_tools(store: Arc<dyn MemoryStore>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(MemoryReadTool::new(store.clone())),
        Arc::new(MemoryWriteTool::new(store.clone())),
        Arc::new(MemoryDeleteTool::new(store)),
    ]
}

/// `memory_read {topic}`: a memory's full text, `MEMORY` for the index, `_list` for the list of
/// all memories with their descriptions; `memory_read {grep}`: the lines of every memory that
/// contain a text (any script, case and width folded, accents of Latin letters ignored), newest
/// memory first.
#[derive(Clone)]
pub struct MemoryReadTool {
    store: Arc<dyn MemoryStore>,
}

impl MemoryReadTool {
    /// A read tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store }
    }
}

#[derive(Deserialize)]
struct ReadInput {
    #[serde(default)]
    topic: Option<String>,
    #[serde(default)]
    grep: Option<String>,
}

/// Most memories a `grep` answer names, and most lines it shows of each.
const GREP_FILES: usize = 20;
const GREP_LINES_PER_FILE: usize = 5;
/// Longest line a `grep` answer shows, in characters.
const GREP_LINE_CHARS: usize = 300;

/// The form a `grep` compares: NFKC, lowercase, accents of Latin letters removed.
fn grep_form(text: &str) -> String {
    memloop_text::fold_with_offsets(&memloop_text::normalize(text)).0
}

impl MemoryReadTool {
    /// Every memory's lines that contain `pattern` (see [`grep_form`]), newest memory first,
    /// credentials redacted (a hand-edited file may hold one).
    async fn grep(&self, pattern: &str) -> Result<String, memloop_store::MemoryError> {
        let needle = grep_form(pattern.trim());
        if needle.is_empty() {
            return Ok("grep needs a non-empty text to look for.".to_owned());
        }
        let headers = self.store.scan().await?;
        let (mut out, mut matched) = (String::new(), 0usize);
        for header in &headers {
            let file = match self.store.read(&header.rel_path).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::debug!(path = %header.rel_path, error = %e, "grep skipped a memory");
                    continue;
                }
            };
            let hits: Vec<(usize, &str)> = file
                .raw
                .lines()
                .enumerate()
                .filter(|(_, line)| grep_form(line).contains(&needle))
                .collect();
            if hits.is_empty() {
                continue;
            }
            matched += 1;
            if matched > GREP_FILES {
                continue;
            }
            out.push_str(&format!("\n{}\n", header.rel_path));
            for (n, line) in hits.iter().take(GREP_LINES_PER_FILE) {
                let shown: String = line.chars().take(GREP_LINE_CHARS).collect();
                let (shown, _) = memloop_secrets::redact_secrets(&shown);
                out.push_str(&format!("  {}: {}\n", n + 1, shown.trim_end()));
            }
            if hits.len() > GREP_LINES_PER_FILE {
                out.push_str(&format!(
                    "  ({} more lines match)\n",
                    hits.len() - GREP_LINES_PER_FILE
                ));
            }
        }
        Ok(match matched {
            0 => format!("No memory contains `{}`.", pattern.trim()),
            n if n > GREP_FILES => format!(
                "{n} memories contain `{}`; the {GREP_FILES} newest:\n{out}\nNarrow the text to see \
                 the rest.",
                pattern.trim()
            ),
            1 => format!("1 memory contains `{}`:\n{out}", pattern.trim()),
            n => format!("{n} memories contain `{}`:\n{out}", pattern.trim()),
        })
    }
}

fn parse<T: for<'de> Deserialize<'de>>(input: &Value, tool: &str) -> Result<T, String> {
    serde_json::from_value(input.clone()).map_err(|e| format!("{tool}: invalid input: {e}"))
}

#[async_trait]
impl Tool for MemoryReadTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: MEMORY_READ.into(),
            description: "Read your persistent memory. topic = a memory's name (e.g. \
                `feedback_testing`) or its path as listed (e.g. `team/grafana.md`), `MEMORY` for \
                the index, or `_list` for every memory with its type, date and description. Or \
                grep = a text to find in every memory's content (the matching lines, newest \
                memory first)."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "topic": {"type": "string", "description": "memory name or listed path, `MEMORY` or `_list`"},
                    "grep": {"type": "string", "description": "text to search every memory for (instead of topic)"}
                }
            }),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> ToolOutput {
        let input: ReadInput = match parse(&input, MEMORY_READ) {
            Ok(i) => i,
            Err(e) => return ToolOutput::error(e),
        };
        let topic = match (input.topic, input.grep) {
            (_, Some(pattern)) => {
                return match self.grep(&pattern).await {
                    Ok(text) => ToolOutput::ok(text),
                    Err(e) => ToolOutput::error(format!("{MEMORY_READ} failed: {e}")),
                };
            }
            (Some(topic), None) => topic,
            (None, None) => {
                return ToolOutput::error(format!(
                    "{MEMORY_READ}: give `topic` (a memory, `MEMORY` or `_list`) or `grep` (a \
                     text to find)"
                ));
            }
        };
        let result = match topic.as_str() {
            INDEX_TOPIC => self.store.load_index().await.map(|ix| {
                if ix.content.is_empty() {
                    "MEMORY.md is empty: no memories saved yet.".to_owned()
                } else {
                    ix.content
                }
            }),
            LIST_TOPIC => self.store.scan().await.map(|h| {
                if h.is_empty() {
                    "No memories saved yet.".to_owned()
                } else {
                    format_manifest(&h)
                }
            }),
            topic => match read_target_to_rel_path(topic) {
                Ok(rel) => self.store.read(&rel).await.map(|f| f.raw),
                Err(e) => Err(e),
            },
        };
        match result {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => ToolOutput::error(format!("{MEMORY_READ} failed: {e}")),
        }
    }
}

/// `memory_write {topic, content, mode, name?, description?, type?}`: save a memory file and its
/// index line in one atomic, locked operation.
#[derive(Clone)]
pub struct MemoryWriteTool {
    store: Arc<dyn MemoryStore>,
}

impl MemoryWriteTool {
    /// A write tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store }
    }
}

#[derive(Deserialize)]
struct WriteInput {
    topic: String,
    content: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "type")]
    memory_type: Option<String>,
}

impl WriteInput {
    fn mode(&self) -> Result<WriteMode, String> {
        match self.mode.as_deref().map(str::trim) {
            None | Some("") | Some("overwrite") => Ok(WriteMode::Overwrite),
            Some("append") => Ok(WriteMode::Append),
            Some(other) => Err(format!(
                "unknown mode `{other}` (use `append` or `overwrite`)"
            )),
        }
    }

    fn doc(&self, mode: WriteMode) -> Result<MemoryDoc, String> {
        let memory_type = match self.memory_type.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(t) => Some(t.parse::<MemoryType>()?),
        };
        let opt = |v: &Option<String>| v.as_deref().map(str::trim).unwrap_or("").to_owned();
        let mut name = opt(&self.name);
        // A new or replaced file needs a name; appends keep the existing one unless given.
        if name.is_empty() && mode == WriteMode::Overwrite {
            name = self.topic.trim_end_matches(".md").to_owned();
        }
        Ok(MemoryDoc {
            name,
            description: opt(&self.description),
            memory_type,
            body: self.content.clone(),
        })
    }
}

#[async_trait]
impl Tool for MemoryWriteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: MEMORY_WRITE.into(),
            description: "Save a memory as a topic file and keep its one-line entry in MEMORY.md \
                up to date. mode `overwrite` (default) replaces the topic, `append` adds to it. Give \
                a short name, a specific one-line description, and a type."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "topic": {"type": "string", "description": "file name without path, e.g. `feedback_testing`; `team/<name>` writes team memory where the memory section shows one"},
                    "content": {"type": "string", "description": "the memory body"},
                    "mode": {"type": "string", "enum": ["append", "overwrite"]},
                    "name": {"type": "string"},
                    "description": {"type": "string", "description": "one specific line: what recall matches on"},
                    "type": {"type": "string", "enum": ["user", "feedback", "project", "reference"]}
                },
                "required": ["topic", "content"]
            }),
            effect: ToolEffect::WritesFiles,
        }
    }

    fn write_targets(&self, input: &Value, _ctx: &ToolContext) -> Result<Vec<PathBuf>, String> {
        let input: WriteInput = parse(input, MEMORY_WRITE)?;
        let rel = topic_to_rel_path(&input.topic).map_err(|e| e.to_string())?;
        let path = self.store.write_target(&rel).map_err(|e| e.to_string())?;
        Ok(vec![path])
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> ToolOutput {
        let fail = |e: String| ToolOutput::error(format!("{MEMORY_WRITE} failed: {e}"));
        let input: WriteInput = match parse(&input, MEMORY_WRITE) {
            Ok(i) => i,
            Err(e) => return ToolOutput::error(e),
        };
        let prepared = input.mode().and_then(|mode| Ok((mode, input.doc(mode)?)));
        let (mode, doc) = match prepared {
            Ok(p) => p,
            Err(e) => return fail(e),
        };
        let rel = match topic_to_rel_path(&input.topic) {
            Ok(r) => r,
            Err(e) => return fail(e.to_string()),
        };
        match self.store.write(&rel, &doc, mode).await {
            Ok(report) => {
                let verb = if report.created { "Created" } else { "Updated" };
                let index = memloop_store::MemoryScope::of(&rel).index_file();
                ToolOutput::ok(format!("{verb} memory `{rel}` and its line in {index}."))
                    .with_file_written(report.path)
            }
            Err(e) => fail(e.to_string()),
        }
    }
}

/// `memory_delete {topic}`: delete a memory file and its index line through the store.
#[derive(Clone)]
pub struct MemoryDeleteTool {
    store: Arc<dyn MemoryStore>,
}

impl MemoryDeleteTool {
    /// A delete tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store }
    }
}

#[derive(Deserialize)]
struct DeleteInput {
    topic: String,
}

fn delete_target(input: &Value) -> Result<String, String> {
    let input: DeleteInput = parse(input, MEMORY_DELETE)?;
    read_target_to_rel_path(&input.topic).map_err(|e| e.to_string())
}

#[async_trait]
impl Tool for MemoryDeleteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: MEMORY_DELETE.into(),
            description:
                "Delete a memory that is wrong, obsolete or merged into another, together \
                with its line in MEMORY.md. topic = the memory's name (e.g. `feedback_testing`) or \
                its path as listed (e.g. `team/grafana.md`)."
                    .into(),
            input_schema: json!({
                "type": "object",
                "properties": {"topic": {"type": "string", "description": "memory name or listed path"}},
                "required": ["topic"]
            }),
            effect: ToolEffect::WritesFiles,
        }
    }

    fn write_targets(&self, input: &Value, _ctx: &ToolContext) -> Result<Vec<PathBuf>, String> {
        let rel = delete_target(input)?;
        self.store
            .write_target(&rel)
            .map(|p| vec![p])
            .map_err(|e| e.to_string())
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> ToolOutput {
        let rel = match delete_target(&input) {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(format!("{MEMORY_DELETE} failed: {e}")),
        };
        match self.store.delete(&rel).await {
            Ok(()) => ToolOutput::ok(format!("Deleted memory `{rel}` and its line in MEMORY.md.")),
            Err(e) => ToolOutput::error(format!("{MEMORY_DELETE} failed: {e}")),
        }
    }
}
