//! The default [`Extractor`]: a forked agent with the memory-writer permissions.

use super::extractor::{ExtractError, ExtractionContext, Extractor};
use crate::daily_log::DailyLogTool;
use crate::tools::{MemoryReadTool, MemoryWriteTool};
use crate::writer_tools::{
    EXTRACTOR_WRITES, TallyStore, bind_tools, memory_paths_of, memory_writer_gate,
};
use async_trait::async_trait;
use memloop_core::{fork::ForkedAgentBuilder, tool::Tool};
use memloop_store::format_manifest_capped;
use memloop_store::{MemoryPath, MemoryStore};
use memloop_text::render_template as render;
use std::sync::Arc;

/// The `purpose` of the extractor's model requests (hosts' scripted models match on it).
pub const EXTRACTOR_PURPOSE: &str = "extractor";

const TEMPLATE: &str = include_str!("../../templates/extract.md");
use crate::daily_log::DAILY_LOG_GUIDANCE as DAILY_LOG;

/// Settings of the [`ForkedExtractor`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractorConfig {
    /// Model calls allowed. Default 5.
    pub max_turns: u32,
    /// The prompt tells the extractor to look at most at this many of the newest messages.
    pub recent_messages: usize,
    /// Newest memory headers listed in the manifest.
    pub manifest_limit: usize,
    /// `max_tokens` per request.
    pub max_tokens: u32,
    /// Daily-log mode: the prompt asks for log lines instead of topic files, and the extractor
    /// binds the `memory_log_append` tool (register a [`DailyLogTool`] on the main agent too, so
    /// its requests keep the agent's cached prefix).
    pub daily_log: bool,
    /// Private and team memory (see [`MemoryScope`](memloop_store::MemoryScope)): the prompt
    /// carries the rule for which memory goes where, and the extractor saves shared project
    /// knowledge as `team/<topic>` and personal memories without the prefix.
    pub team: bool,
}

impl Default for ExtractorConfig {
    fn default() -> Self {
        Self {
            max_turns: 5,
            recent_messages: 40,
            manifest_limit: 200,
            max_tokens: 4_096,
            daily_log: false,
            team: false,
        }
    }
}

/// A forked agent that shares the conversation prefix and declares the parent's tools unchanged
/// (so its requests reuse the parent's cached prompt), gets the manifest of existing memories,
/// and may write only with `memory_write` inside the memory dir (its permission gate refuses
/// any other write, and deletes). Its working directory is the memory dir.
///
/// It binds its own `memory_read` / `memory_write` (the latter writing through a tally, so a run
/// whose every write failed is reported): when the parent declares the same tools, as an agent
/// wired by `memloop::MemorySetup` or with [`memory_tools`](crate::tools::memory_tools) does,
/// the request prefix is unchanged; otherwise the tools are added and the fork misses the
/// parent's cache.
pub struct ForkedExtractor {
    store: Arc<dyn MemoryStore>,
    config: ExtractorConfig,
    extra_tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for ForkedExtractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForkedExtractor")
            .field("store", &self.store.describe().to_string())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ForkedExtractor {
    /// An extractor writing into `store` with the default config.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            extra_tools: Vec::new(),
            store,
            config: ExtractorConfig::default(),
        }
    }

    /// Replace the config (builder style).
    pub fn config(mut self, config: ExtractorConfig) -> Self {
        self.config = config;
        self
    }

    /// Bind one more tool on the extractor (builder style). Declare it on the main agent too,
    /// or the fork's requests miss its cached prefix. Its writes still go through the gate.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.extra_tools.push(tool);
        self
    }

    /// The prompt for a run over `new_messages` messages.
    pub async fn prompt(&self, new_messages: usize) -> Result<String, ExtractError> {
        let headers = self.store.scan().await?;
        let manifest = format_manifest_capped(&headers, self.config.manifest_limit, "(none yet)");
        let shown = new_messages.min(self.config.recent_messages).to_string();
        let root = self.store.describe().to_string();
        let turns = self.config.max_turns.to_string();
        let daily = if self.config.daily_log { DAILY_LOG } else { "" };
        let team = match self.config.team {
            true => format!(
                "{}\nSave team memories with the topic `team/<name>` (e.g. `team/release_process`); \
                 everything else without the prefix.\n\n",
                crate::prompt::team_guidance(&root).trim_end()
            ),
            false => String::new(),
        };
        Ok(render(
            TEMPLATE,
            &[
                ("memory_dir", &root),
                ("new_messages", &shown),
                ("manifest", &manifest),
                ("max_turns", &turns),
                ("daily_log", daily),
                ("team", &team),
            ],
        ))
    }
}

#[async_trait]
impl Extractor for ForkedExtractor {
    /// The memories the fork's tools wrote, relative to the store (the files they report are
    /// mapped back to memory paths; `MEMORY.md` and anything outside the store are left out).
    async fn extract(&self, ctx: &ExtractionContext) -> Result<Vec<MemoryPath>, ExtractError> {
        let prompt = self.prompt(ctx.new_messages.len()).await?;
        let mut base = ctx.hook.clone();
        if let Some(dir) = self.store.describe().dir() {
            base.cwd = dir.to_path_buf();
        }
        // The memory tools write through a tally, so a run whose every write failed (a
        // read-only dir, a held lock) is reported as failed and its messages offered again.
        let tally = Arc::new(TallyStore::new(self.store.clone()));
        let tallied: Arc<dyn MemoryStore> = tally.clone();
        let mut tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(MemoryReadTool::new(tallied.clone())),
            Arc::new(MemoryWriteTool::new(tallied.clone())),
        ];
        if self.config.daily_log {
            tools.push(Arc::new(DailyLogTool::new(tallied)));
        }
        tools.extend(self.extra_tools.iter().cloned());
        let fork = ForkedAgentBuilder::new(base, EXTRACTOR_PURPOSE)
            .gate(memory_writer_gate(&self.store, EXTRACTOR_WRITES));
        let outcome = bind_tools(fork, tools)
            .max_turns(self.config.max_turns)
            .max_tokens(self.config.max_tokens)
            .build()
            .run(prompt)
            .await?;
        tracing::info!(
            turns = outcome.turns,
            tool_calls = outcome.tool_calls,
            denied = outcome.denied_calls,
            written = outcome.files_written.len(),
            failed = outcome.failed_calls,
            "extractor finished"
        );
        // On the scheduler's `extract` span this run is instrumented with.
        tracing::Span::current().record("memloop.extract.refused", outcome.failed_calls);
        if let Some(why) = tally.all_failed() {
            return Err(ExtractError::Failed(why));
        }
        Ok(memory_paths_of(self.store.as_ref(), &outcome.files_written))
    }
}

#[cfg(test)]
mod template_tests {
    #[test]
    fn exclusions_hold_even_when_the_user_asks() {
        assert!(super::TEMPLATE.contains(
            "These stay out even\nwhen the user asked to remember them: save only the lasting part"
        ));
    }
}
