//! The forked consolidator: a consolidation prompt, the parent's tools, and a gate that lets it
//! write only with `memory_write` and `memory_delete` inside the memory dir.

use crate::tools::memory_tools;
use crate::writer_tools::WriterError;
use crate::writer_tools::{CONSOLIDATOR_WRITES, bind_tools, memory_writer_gate};
use memloop_core::{HookContext, fork::ForkedAgentBuilder, tool::Tool};
use memloop_store::IndexCaps;
use memloop_store::MemoryStore;
use memloop_store::format_manifest_capped;
use memloop_text::render_template;
use std::path::PathBuf;
use std::sync::Arc;

/// The `purpose` of the consolidator's model requests.
pub const DREAM_PURPOSE: &str = "dream";

const TEMPLATE: &str = include_str!("../../templates/dream.md");

/// Merges, dedups and prunes a memory dir with a forked agent. It does not share the
/// conversation (it works on the memory dir, not on this session) but declares the parent's
/// tools and sends its system prompt, so its requests reuse the cached tools and system prompt;
/// it may write only with `memory_write` / `memory_delete` inside the memory dir.
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
            .field("store", &self.store.describe().to_string())
            .field("max_turns", &self.max_turns)
            .finish_non_exhaustive()
    }
}

impl Consolidator {
    /// A consolidator over `store`; 10 turns. It binds the store's
    /// [`memory_tools`] (read, write, delete): when the parent declares them, as an agent wired by
    /// `memloop::MemorySetup` does, its tool list is the parent's.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            tools: memory_tools(store.clone()),
            store,
            max_turns: 10,
            max_tokens: 8_192,
            manifest_limit: 200,
        }
    }

    /// The prompt for one consolidation.
    pub async fn prompt(&self) -> Result<String, WriterError> {
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
                ("memory_dir", &self.store.describe().to_string()),
                ("today", &today),
                ("index", &index),
                ("manifest", &manifest),
                ("max_turns", &self.max_turns.to_string()),
                ("index_max_lines", &caps.max_lines.to_string()),
                ("index_max_bytes", &caps.max_bytes.to_string()),
            ],
        ))
    }

    /// Run one consolidation outside any agent (no [`HookContext`] at hand): forked from a
    /// bare context over `model` (no conversation, no system prompt, only the memory tools),
    /// in the memory dir. Takes no lock: [`DreamHook::run_now`](super::DreamHook::run_now) is the
    /// locked, gated entry point.
    pub async fn run_standalone(
        &self,
        model: Arc<dyn memloop_core::model::Model>,
    ) -> Result<Vec<PathBuf>, WriterError> {
        let hook = HookContext {
            session_id: format!("manual-dream-{}", uuid::Uuid::new_v4()),
            turn: 0,
            agent: memloop_core::tool::AgentKind::Main,
            cwd: std::env::temp_dir(),
            model,
            system: Arc::new(Vec::new()),
            messages: Arc::new(Vec::new()),
            tools: memloop_core::tool::ToolRegistry::new(),
            context_tokens: 0,
            recent_tools: Vec::new(),
            window: memloop_core::window::ContextWindow::default(),
            events: Arc::new(memloop_core::events::NullSink),
            background: memloop_core::BackgroundTasks::new(),
            cancel: memloop_core::CancellationToken::new(),
            capture: None,
        };
        self.run(&hook).await
    }

    /// Run one consolidation forked from `hook`; returns the files written.
    pub async fn run(&self, hook: &HookContext) -> Result<Vec<PathBuf>, WriterError> {
        let prompt = self.prompt().await?;
        let mut base = hook.clone();
        if let Some(dir) = self.store.describe().dir() {
            base.cwd = dir.to_path_buf();
        }
        let fork = ForkedAgentBuilder::new(base, DREAM_PURPOSE)
            .share_prefix(false)
            .gate(memory_writer_gate(&self.store, CONSOLIDATOR_WRITES));
        let outcome = bind_tools(fork, self.tools.iter().cloned())
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
