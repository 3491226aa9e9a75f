//! The memory parts a [`MemorySetup`] wires, built in one place for both of their drivers:
//! memloop's own agent loop ([`MemorySetup::attach`]) and a host's loop
//! ([`MemorySetup::open_session`](crate::MemorySetup::open_session)). Each part is the one
//! implementation of its behaviour (the recall hook, the extraction scheduler, the session notes
//! hook, the compactor, the memory tools, the memory section); a driver only calls it.

use super::{Compaction, MemorySetup, SetupError};
use memloop_compact::{CompactConfig, Compactor};
use memloop_core::Hook;
use memloop_core::tokens::TokenCounter;
use memloop_core::tool::Tool;
use memloop_memory::dream::{Consolidator, DailyLogTool, DreamConfig, DreamHook, SessionRecords};
use memloop_memory::extract::{
    ExtractionScheduler, Extractor, ExtractorConfig, ForkedExtractor, SchedulerConfig,
};
use memloop_memory::session_notes::{
    FileSessionNotes, NotesEditTool, SessionMemory, SessionNotesHook,
};
use memloop_memory::{prompt::MemorySection, tools::memory_tools};
use memloop_recall::{
    DefaultSelector, FallbackSelector, LlmSelector, RecallConfig, RecallHook, RerankSelector,
    Selector,
};
use memloop_store::{LocalPurpose, MemoryStore};
use std::path::PathBuf;
use std::sync::Arc;

/// What memory adds to an agent when it is on.
pub(crate) struct MemoryParts {
    /// The store, whose [`LocalDir`](memloop_store::LocalDir)s the capability check approved.
    pub store: Arc<dyn MemoryStore>,
    /// The memory tools, then the daily-log tool (in daily-log mode).
    pub tools: Vec<Arc<dyn Tool>>,
    /// The memory section of the system prompt.
    pub section: Arc<MemorySection>,
    /// In the order they fire: team pull (feature `postgres`), recall, extraction, dream.
    pub hooks: Vec<Arc<dyn Hook>>,
}

/// Compaction with the session notes as its summary.
pub(crate) struct CompactionParts {
    /// The compactor (its token counter is the driver's).
    pub compactor: Arc<Compactor>,
    /// Where cut tool output is kept (the session directory of the notes), if anywhere.
    pub spill_dir: Option<PathBuf>,
    /// The notes' edit tool and the hook that updates the notes, while automatic compaction is
    /// on (with it off nothing would read the notes, so they are not written either).
    pub notes: Option<(Arc<dyn Tool>, Arc<dyn Hook>)>,
}

impl MemorySetup {
    /// The memory parts, `None` when memory is switched off.
    pub(crate) fn memory_parts(&self) -> Result<Option<MemoryParts>, SetupError> {
        let Some(on) = &self.on else {
            return Ok(None);
        };
        let store = on.store()?.clone();
        self.check_capabilities(store.as_ref(), on.given.is_some())?;
        let mut tools = memory_tools(store.clone());
        if self.daily_log {
            tools.push(Arc::new(DailyLogTool::new(store.clone())));
        }
        let section = Arc::new(
            MemorySection::from_env(store.clone(), &self.env)
                .daily_log(self.daily_log)
                .team(self.team_memory)
                .guidance(self.chosen_guidance()),
        );
        let mut hooks: Vec<Arc<dyn Hook>> = Vec::new();
        #[cfg(feature = "postgres")]
        if let Some(sync) = &self.team {
            hooks.push(Arc::new(memloop_pg::TeamPullHook::new(sync.clone())));
        }
        if self.recall {
            hooks.push(Arc::new(self.recall_hook(&store)));
        }
        if self.extraction {
            hooks.push(Arc::new(self.extraction_scheduler(&store)));
        }
        if self.dream {
            let dream = DreamHook::with_parts(
                store.clone(),
                DreamConfig {
                    enabled: self.dream_config.enabled && DreamConfig::from_env(&self.env).enabled,
                    ..self.dream_config.clone()
                },
                Arc::new(SessionRecords::for_memory_dir(
                    &store.local_dir_or_temp(LocalPurpose::SessionRecords),
                )),
                Consolidator::new(store.clone()),
            );
            hooks.push(Arc::new(dream));
        }
        Ok(Some(MemoryParts {
            store,
            tools,
            section,
            hooks,
        }))
    }

    /// The recall hook over `store`: the host's selector, else the side model's (re-ranking or
    /// with the lexical fallback), else the default lexical (and dense) selector.
    fn recall_hook(&self, store: &Arc<dyn MemoryStore>) -> RecallHook {
        match &self.embedder {
            Some(e) => {
                tracing::info!(target: "memloop::recall", model = e.model_id(), "recall: hybrid (BM25 + embeddings)");
                // Start loading a lazily loaded model now, not at the first query.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let embedder = e.clone();
                    runtime.spawn(async move {
                        if let Err(e) = embedder.ready().await {
                            tracing::warn!(error = %e, "the embedding model cannot load: recall ranks with BM25");
                        }
                    });
                }
            }
            None => {
                tracing::info!(target: "memloop::recall", "recall: BM25 (no embedding model)")
            }
        }
        let lexical = DefaultSelector::with_config(
            store.clone(),
            self.embedder.clone(),
            self.selector_config(),
        )
        .selector();
        let selector = match (&self.selector, &self.side_model) {
            (Some(selector), _) => selector.clone(),
            (None, Some(model)) if self.rerank => Arc::new(RerankSelector::with_config(
                lexical,
                LlmSelector::with_config(model.clone(), self.llm_selector.clone()),
                self.rerank_config,
            )) as Arc<dyn Selector>,
            (None, Some(model)) => Arc::new(FallbackSelector::new(
                Arc::new(LlmSelector::with_config(
                    model.clone(),
                    self.llm_selector.clone(),
                )),
                lexical,
                self.llm_selector.timeout,
            )) as Arc<dyn Selector>,
            (None, None) => lexical,
        };
        // The host's config is the base; the environment's memory switches still turn recall
        // off.
        let config = RecallConfig {
            enabled: self.recall_config.enabled && RecallConfig::from_env(&self.env).enabled,
            ..self.recall_config.clone()
        };
        RecallHook::new(store.clone(), selector).with_config(config)
    }

    /// The extraction stop hook over `store`: the host's extractor, else the forked writer.
    fn extraction_scheduler(&self, store: &Arc<dyn MemoryStore>) -> ExtractionScheduler {
        let extractor = match &self.extractor {
            Some(extractor) => extractor.clone(),
            // Daily-log mode and team memory are the setup's: they shape the main agent's
            // prompt too, and the two must agree.
            None => Arc::new(ForkedExtractor::new(store.clone()).config(ExtractorConfig {
                daily_log: self.daily_log,
                team: self.team_memory,
                ..self.extractor_config.clone()
            })) as Arc<dyn Extractor>,
        };
        ExtractionScheduler::with_config(
            store.clone(),
            extractor,
            SchedulerConfig {
                enabled: self.scheduler.enabled && SchedulerConfig::from_env(&self.env).enabled,
                ..self.scheduler.clone()
            },
        )
    }

    /// Compaction for the session `session` measured with `counter`, `None` when none is
    /// configured. The notes settings are the host's, else the defaults (`None` with a store of
    /// the host's that keeps no session notes: then only notes of the host's are used, and no
    /// cut output is kept on disk).
    pub(crate) fn compaction_parts(
        &self,
        session: &str,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<Option<CompactionParts>, SetupError> {
        let (compact, notes_config) = match &self.compaction {
            Compaction::Custom(both) => (both.0, Some(both.1.clone())),
            Compaction::Default if self.on.is_some() => {
                (CompactConfig::default(), self.default_notes_config())
            }
            Compaction::Default | Compaction::Off => return Ok(None),
        };
        let spill_dir = notes_config.as_ref().map(|n| n.session_dir(session));
        let notes: Option<Arc<dyn SessionMemory>> = match (&self.session_memory, notes_config) {
            (Some(given), _) => Some(given.clone()),
            (None, Some(config)) => Some(Arc::new(FileSessionNotes::new(config, session)?)),
            (None, None) => None,
        };
        let compact = compact.with_env(&self.env);
        let keep_notes = !compact.disabled && !compact.auto_disabled;
        let mut compactor = Compactor::new(compact).with_token_counter(counter);
        if let Some(notes) = &notes {
            compactor = compactor.with_session_notes(notes.clone());
        }
        if let Some(dir) = &spill_dir {
            compactor = compactor.with_spill_dir(dir.clone());
        }
        let notes = notes.filter(|_| keep_notes).map(|notes| {
            let tool: Arc<dyn Tool> = Arc::new(NotesEditTool::new(notes.notes_path()));
            // Notes updates after sampling (background, FIFO); baselines reset after
            // compaction.
            let hook: Arc<dyn Hook> = Arc::new(SessionNotesHook::new(notes));
            (tool, hook)
        });
        Ok(Some(CompactionParts {
            compactor: Arc::new(compactor),
            spill_dir,
            notes,
        }))
    }
}
