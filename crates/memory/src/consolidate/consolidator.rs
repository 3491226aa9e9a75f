//! The forked consolidator: the extractor's permissions, a consolidation prompt, and a
//! `memory_delete` tool for pruning.

use crate::extract::ExtractError;
use crate::index::IndexCaps;
use crate::manifest::format_manifest_capped;
use crate::memory_store::MemoryStore;
use crate::tools::{MEMORY_DELETE, memory_tools};
use crate::writer_tools::{memory_writer_gate, memory_writer_tools};
use async_trait::async_trait;
use memloop_core::text::render_template;
use memloop_core::{
    HookContext,
    fork::ForkedAgentBuilder,
    tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec},
};
use std::path::PathBuf;
use std::sync::Arc;

/// The `purpose` of the consolidator's model requests.
pub const DREAM_PURPOSE: &str = "dream";

const TEMPLATE: &str = include_str!("../../templates/dream.md");

/// Merges, dedups and prunes a memory dir with a forked agent. It does not
/// share the conversation (it works on the memory dir, not on this session), and may write only
/// inside the memory dir.
pub struct Consolidator {
    store: Arc<dyn MemoryStore>,
    tools: Vec<Arc<dyn Tool>>,
    /// Model calls allowed.
    pub max_turns: u32,
    /// `max_tokens` per request.
    pub max_tokens: u32,
    /// Newest memory headers listed in the prompt.
    pub manifest_limit: usize,
}

impl std::fmt::Debug for Consolidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consolidator")
            .field("root", &self.store.root())
            .field("max_turns", &self.max_turns)
            .finish_non_exhaustive()
    }
}

impl Consolidator {
    /// A consolidator over `store`: the generic read-only and file tools, the store's memory
    /// tools, and `memory_delete`; 10 turns.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        let mut tools = memory_tools(store.clone());
        tools.push(Arc::new(MemoryDeleteTool {
            store: store.clone(),
        }));
        Self {
            store,
            tools,
            max_turns: 10,
            max_tokens: 8_192,
            manifest_limit: 200,
        }
    }

    /// The prompt for one consolidation.
    pub async fn prompt(&self) -> Result<String, ExtractError> {
        let headers = self.store.scan().await?;
        let manifest = format_manifest_capped(&headers, self.manifest_limit, "(none)");
        let index = self.store.load_index().await?.content;
        let index = if index.trim().is_empty() {
            "(empty)".to_owned()
        } else {
            index
        };
        let caps = IndexCaps::default();
        let today = chrono::Local::now().date_naive().to_string();
        Ok(render_template(
            TEMPLATE,
            &[
                ("memory_dir", &self.store.root().display().to_string()),
                ("today", &today),
                ("index", &index),
                ("manifest", &manifest),
                ("max_turns", &self.max_turns.to_string()),
                ("index_max_lines", &caps.max_lines.to_string()),
                ("index_max_bytes", &caps.max_bytes.to_string()),
            ],
        ))
    }

    /// Run one consolidation forked from `hook`; returns the files written.
    pub async fn run(&self, hook: &HookContext) -> Result<Vec<PathBuf>, ExtractError> {
        let prompt = self.prompt().await?;
        let mut base = hook.fork_base();
        base.cwd = self.store.root().to_path_buf();
        let outcome = ForkedAgentBuilder::new(base, DREAM_PURPOSE)
            .share_prefix(false)
            .tools(memory_writer_tools(&self.tools))
            .gate(memory_writer_gate(&self.store))
            .max_turns(self.max_turns)
            .max_tokens(self.max_tokens)
            .build()
            .run(prompt)
            .await?;
        tracing::info!(
            turns = outcome.turns,
            written = outcome.files_written.len(),
            denied = outcome.denied_calls,
            "consolidation finished"
        );
        Ok(outcome.files_written)
    }
}

/// `memory_delete {path}`: delete a memory file and its index line through the store.
struct MemoryDeleteTool {
    store: Arc<dyn MemoryStore>,
}

fn rel_path(input: &serde_json::Value) -> Result<&str, String> {
    input
        .get("path")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| "missing required string field `path`".to_owned())
}

#[async_trait]
impl Tool for MemoryDeleteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: MEMORY_DELETE.into(),
            description: "Delete a memory file (path relative to the memory directory) and its \
                          line in MEMORY.md."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            }),
            effect: ToolEffect::WritesFiles,
        }
    }

    fn write_targets(
        &self,
        input: &serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<Vec<PathBuf>, String> {
        let rel = rel_path(input)?;
        self.store
            .check_contained(rel.as_ref())
            .map(|p| vec![p])
            .map_err(|e| e.to_string())
    }

    async fn call(&self, input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        let rel = match rel_path(&input) {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(e),
        };
        match self.store.delete(rel).await {
            Ok(()) => ToolOutput::ok(format!("Deleted memory `{rel}` and its index line.")),
            Err(e) => ToolOutput::error(format!("memory_delete failed: {e}")),
        }
    }
}
