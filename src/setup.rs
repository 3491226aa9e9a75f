//! [`MemorySetup`]: the common case in one call. Resolves the project's memory dir, opens the file
//! store and wires memory into an [`AgentBuilder`] (tools, the memory section of the system
//! prompt, recall, extraction, consolidation, session notes and compaction), honouring the
//! environment switches (`MEMLOOP_DISABLE_AUTO_MEMORY`, `MEMLOOP_MEMORY_DIR`, `MEMLOOP_HOME`,
//! `MEMLOOP_DISABLE_COMPACT`, `MEMLOOP_DISABLE_AUTO_COMPACT`, `MEMLOOP_AUTOCOMPACT_PCT`).

use memloop_compact::{CompactConfig, Compactor};
use memloop_core::AgentBuilder;
use memloop_memory::consolidate::{Consolidator, DreamConfig, DreamHook, ProjectDirSessions};
use memloop_memory::extract::{ExtractionScheduler, ForkedExtractor, SchedulerConfig};
use memloop_memory::recall::{Bm25Selector, RecallHook, Selector};
use memloop_memory::session_memory::{
    FileSessionMemory, SessionMemoryConfig, SessionMemoryError, SessionMemoryHook,
};
use memloop_memory::{
    env::EnvVars,
    instructions::{InstructionConfig, InstructionLoader, InstructionsSection, LoadOptions},
    paths::{MemoryDirResolver, ResolvedMemoryDir},
    prompt::MemorySection,
    store::{FileMemoryStore, MemoryError, MemoryStore},
    tools::memory_tools,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why [`MemorySetup`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Resolving or opening the memory dir failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The session notes could not be created.
    #[error(transparent)]
    SessionMemory(#[from] SessionMemoryError),
}

/// Memory for one project, ready to attach to agents.
///
/// ```no_run
/// # async fn demo(model: std::sync::Arc<dyn memloop::core::model::Model>) -> Result<(), Box<dyn std::error::Error>> {
/// use memloop::{MemorySetup, core::Agent};
///
/// let memory = MemorySetup::for_project(std::env::current_dir()?)?;
/// let builder = Agent::builder(model);
/// let mut agent = memory.attach(builder)?.build();
/// agent.run_turn("We deploy on Fridays only after the 2pm freeze lifts.").await?;
/// agent.drain(std::time::Duration::from_secs(60)).await; // let the extractor finish
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MemorySetup {
    env: EnvVars,
    resolved: ResolvedMemoryDir,
    project_dir: PathBuf,
    base: PathBuf,
    store: Arc<dyn MemoryStore>,
    selector: Option<Arc<dyn Selector>>,
    recall: bool,
    extraction: bool,
    dream: bool,
    compaction: Option<(CompactConfig, SessionMemoryConfig)>,
    instructions: Option<InstructionConfig>,
    working_dir: PathBuf,
    #[cfg(feature = "postgres")]
    team: Option<memloop_pg::TeamSync>,
}

impl std::fmt::Debug for MemorySetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySetup")
            .field("memory_dir", &self.resolved.dir)
            .field("enabled", &self.enabled())
            .finish_non_exhaustive()
    }
}

impl MemorySetup {
    /// Memory for the project at `project`, with the process environment.
    pub fn for_project(project: impl Into<PathBuf>) -> Result<Self, SetupError> {
        Self::with_resolver(MemoryDirResolver::new(project), EnvVars::from_process())
    }

    /// Memory resolved by `resolver` (e.g. [`MemoryDirResolver::claude_code`], or one with an
    /// override dir), reading switches from `env`.
    pub fn with_resolver(resolver: MemoryDirResolver, env: EnvVars) -> Result<Self, SetupError> {
        let working_dir = resolver.project().to_path_buf();
        let resolver = resolver.env(env.clone());
        let resolved = resolver.resolve()?;
        let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open_resolved(&resolved)?);
        Ok(Self {
            project_dir: resolver.project_dir()?,
            base: resolver.base_dir()?,
            env,
            resolved,
            store,
            selector: None,
            recall: true,
            extraction: true,
            dream: true,
            compaction: None,
            instructions: None,
            working_dir,
            #[cfg(feature = "postgres")]
            team: None,
        })
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    /// Where the memory dir is and which rule chose it.
    pub fn memory_dir(&self) -> &ResolvedMemoryDir {
        &self.resolved
    }

    /// `<base>/projects/<slug>`: where per-session data (notes) lives.
    pub fn project_dir(&self) -> &Path {
        &self.project_dir
    }

    /// Whether memory is on (`MEMLOOP_DISABLE_AUTO_MEMORY` is not truthy).
    pub fn enabled(&self) -> bool {
        !self.env.auto_memory_disabled()
    }

    /// The recall selector (default: [`Bm25Selector`] over the store).
    pub fn selector(mut self, selector: Arc<dyn Selector>) -> Self {
        self.selector = Some(selector);
        self
    }

    /// Turn recall on or off (default on).
    pub fn recall(mut self, on: bool) -> Self {
        self.recall = on;
        self
    }

    /// Turn background extraction on or off (default on).
    pub fn extraction(mut self, on: bool) -> Self {
        self.extraction = on;
        self
    }

    /// Turn consolidation on or off (default on).
    pub fn dream(mut self, on: bool) -> Self {
        self.dream = on;
        self
    }

    /// Keep session notes and compact with them, with these settings (the env switches of
    /// compaction are applied on top). Off unless called.
    pub fn compaction(mut self, compact: CompactConfig, notes: SessionMemoryConfig) -> Self {
        self.compaction = Some((compact, notes));
        self
    }

    /// Load project instructions (CLAUDE.md / AGENTS.md family, with `@includes`) from the
    /// project dir into a cached system-prompt section placed before the memory section.
    pub fn instructions(mut self, config: InstructionConfig) -> Self {
        self.instructions = Some(config);
        self
    }

    /// Attach a team store: the memory dir is pulled from it (in the background) when a
    /// session starts; push with [`TeamSync::push`](memloop_pg::TeamSync::push) or
    /// `memloop team push`.
    #[cfg(feature = "postgres")]
    pub fn team_sync(mut self, sync: memloop_pg::TeamSync) -> Self {
        self.team = Some(sync);
        self
    }

    /// Connect to the team store at `url` (or `MEMLOOP_DATABASE_URL` when `None`) for
    /// `project_id` (default: the project's git `origin` URL, else its dir name) and sync it with
    /// this memory dir. `Ok(None)` when no URL is configured. Hosts that want to keep working on
    /// local memory when the database is unreachable log the error and carry on without
    /// [`team_sync`](Self::team_sync).
    #[cfg(feature = "postgres")]
    pub async fn connect_team(
        &self,
        url: Option<&str>,
        project_id: Option<&str>,
    ) -> Result<Option<memloop_pg::TeamSync>, memloop_pg::PgError> {
        let Some(url) = url
            .map(str::to_owned)
            .or_else(|| memloop_pg::PgConfig::url_from_env(&self.env))
        else {
            return Ok(None);
        };
        let project = project_id
            .map(str::to_owned)
            .unwrap_or_else(|| memloop_pg::project_id_for(&self.working_dir));
        let team = memloop_pg::PgMemoryStore::open(memloop_pg::PgConfig::new(url, project)).await?;
        let local = FileMemoryStore::open_resolved(&self.resolved)
            .map_err(|e| memloop_pg::PgError::Db(e.to_string()))?;
        Ok(Some(memloop_pg::TeamSync::new(local, team)))
    }

    /// Default session-notes settings for this project (`<project_dir>`, custom templates from
    /// `<base>/session-memory/config/`).
    pub fn default_notes_config(&self) -> SessionMemoryConfig {
        SessionMemoryConfig::new(&self.project_dir).with_config_home(&self.base)
    }

    /// Wire memory into `builder`. With memory disabled by the environment, only compaction (if
    /// configured) is added: no tools, no index, no recall, no extraction, no dream.
    pub fn attach(&self, mut builder: AgentBuilder) -> Result<AgentBuilder, SetupError> {
        if let Some(config) = &self.instructions {
            builder = builder.section(Arc::new(InstructionsSection::live(
                InstructionLoader::new(config.clone()),
                self.working_dir.clone(),
                LoadOptions::default(),
            )));
        }
        if self.enabled() {
            for tool in memory_tools(self.store.clone()) {
                builder = builder.tool(tool);
            }
            builder = builder.section(Arc::new(MemorySection::from_env(
                self.store.clone(),
                &self.env,
            )));
            #[cfg(feature = "postgres")]
            if let Some(sync) = &self.team {
                builder = builder.hook(Arc::new(memloop_pg::TeamPullHook::new(sync.clone())));
            }
            if self.recall {
                let selector = self
                    .selector
                    .clone()
                    .unwrap_or_else(|| Arc::new(Bm25Selector::new(self.store.clone())));
                let recall = Arc::new(RecallHook::new(self.store.clone(), selector));
                builder = builder.hook(recall);
            }
            if self.extraction {
                let extractor = Arc::new(ForkedExtractor::new(self.store.clone()));
                let scheduler = ExtractionScheduler::with_config(
                    self.store.clone(),
                    extractor,
                    SchedulerConfig::from_env(&self.env),
                );
                builder = builder.hook(Arc::new(scheduler));
            }
            if self.dream {
                let dream = DreamHook::with_parts(
                    self.store.clone(),
                    DreamConfig::from_env(&self.env),
                    Arc::new(ProjectDirSessions::for_memory_dir(self.store.root())),
                    Consolidator::new(self.store.clone()),
                );
                builder = builder.hook(Arc::new(dream));
            }
        } else {
            tracing::info!("memory disabled by MEMLOOP_DISABLE_AUTO_MEMORY");
        }
        if let Some((compact, notes)) = &self.compaction {
            let session = builder.session_id().to_owned();
            let notes = Arc::new(FileSessionMemory::new(notes.clone(), &session)?);
            let hook = Arc::new(SessionMemoryHook::new(notes.clone()));
            let compactor = Compactor::new((*compact).with_env(&self.env))
                .with_session_memory(notes)
                .with_token_counter(builder.counter());
            builder = builder
                .hook(hook) // notes updates after sampling (background, FIFO); baselines reset after compaction
                .compactor(Arc::new(compactor));
        }
        Ok(builder)
    }
}
