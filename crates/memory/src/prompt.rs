//! The memory section of the system prompt: guidance (from `templates/memory_prompt.md`) plus
//! the session's capped view of `MEMORY.md`.

use crate::env::EnvVars;
use crate::memory_store::MemoryStore;
use async_trait::async_trait;
use memloop_core::prompt::SystemSection;
use memloop_core::text::render_template;
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../templates/memory_prompt.md");

/// The memory section of the system prompt. Computed once per session (the agent caches
/// sections) from the store's capped index; `None` when memory is disabled.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop_core::prompt::SystemSection;
/// use memloop_memory::{store::FileMemoryStore, prompt::MemorySection};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir()?;
/// let section = MemorySection::new(Arc::new(FileMemoryStore::open(dir.path())?));
/// let text = section.compute().await.unwrap();
/// assert!(text.contains("MEMORY.md is empty"));
/// # Ok(()) }
/// ```
pub struct MemorySection {
    store: Arc<dyn MemoryStore>,
    enabled: bool,
    extra: Option<String>,
    daily_log: bool,
}

impl MemorySection {
    /// Section name.
    pub const NAME: &'static str = "memory";

    /// A section over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            store,
            enabled: true,
            extra: None,
            daily_log: false,
        }
    }

    /// A section that is off when `MEMLOOP_DISABLE_AUTO_MEMORY` is truthy in `env`, with the
    /// text of `MEMLOOP_MEMORY_EXTRA_GUIDELINES` (when set and not blank) appended.
    pub fn from_env(store: Arc<dyn MemoryStore>, env: &EnvVars) -> Self {
        let section = Self::new(store).enabled(!env.switch(crate::env::DISABLE_AUTO_MEMORY));
        match env.get(crate::env::MEMORY_EXTRA_GUIDELINES) {
            Some(extra) => section.extra_guidelines(extra),
            None => section,
        }
    }

    /// Daily-log mode: the guidance tells the agent to append one line per fact to today's log
    /// with `memory_log_append` instead of writing topic files (the extractor's rule too); the
    /// agent needs the [`DailyLogTool`](crate::consolidate::DailyLogTool).
    pub fn daily_log(mut self, on: bool) -> Self {
        self.daily_log = on;
        self
    }

    /// Append `text` to the guidance, under "Additional guidelines" (blank text adds nothing).
    pub fn extra_guidelines(mut self, text: &str) -> Self {
        let text = text.trim();
        self.extra = (!text.is_empty()).then(|| text.to_owned());
        self
    }

    /// Turn the section off (e.g. when `MEMLOOP_DISABLE_AUTO_MEMORY` is truthy): it renders
    /// nothing and no index is loaded.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Render the guidance around a given index text.
    pub fn render(memory_dir: &str, index: &str) -> String {
        let index = if index.trim().is_empty() {
            "MEMORY.md is empty: no memories have been saved yet."
        } else {
            index
        };
        render_template(TEMPLATE, &[("memory_dir", memory_dir), ("index", index)])
    }
}

#[async_trait]
impl SystemSection for MemorySection {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn compute(&self) -> Option<String> {
        if !self.enabled {
            return None;
        }
        let dir = self.store.describe().to_string();
        let index = match self.store.load_index().await {
            Ok(ix) => ix.content,
            Err(e) => {
                tracing::warn!(error = %e, "could not load MEMORY.md for the system prompt");
                format!("(MEMORY.md could not be read: {e})")
            }
        };
        let mut text = Self::render(&dir, &index);
        if self.daily_log {
            text.push_str("\n\n## Daily-log mode\n\n");
            text.push_str(crate::daily_log::DAILY_LOG_GUIDANCE.trim());
            text.push_str(" This replaces \"How to save\" above.");
        }
        if let Some(extra) = &self.extra {
            text.push_str("\n\n## Additional guidelines\n\n");
            text.push_str(extra);
        }
        Some(text)
    }
}
