//! [`MemorySetup`]: the common case in one call, with Claude Code's defaults. Resolves the
//! project's memory dir, opens the file store and wires memory into an [`AgentBuilder`] (tools,
//! project instructions, the memory section of the system prompt, recall, extraction,
//! consolidation, session notes and compaction, transcripts, sub-agents), honouring the settings files
//! (`autoMemoryEnabled`, the managed memory dir) and the environment switches
//! (`MEMLOOP_DISABLE_AUTO_MEMORY`, `MEMLOOP_MEMORY_DIR`, `MEMLOOP_HOME`,
//! `MEMLOOP_MEMORY_EXTRA_GUIDELINES`, `MEMLOOP_DISABLE_COMPACT`, `MEMLOOP_DISABLE_AUTO_COMPACT`,
//! `MEMLOOP_AUTOCOMPACT_PCT`).

mod parts;

use memloop_compact::CompactConfig;
use memloop_core::AgentBuilder;
use memloop_core::embed::Embedder;
use memloop_core::model::Model;
use memloop_files::FileMemoryStore;
use memloop_host::env::EnvVars;
use memloop_instructions::{
    InstructionConfig, InstructionLoader, InstructionsSection, LoadOptions,
};
use memloop_memory::agent_memory::AgentMemory;
use memloop_memory::dream::DreamConfig;
use memloop_memory::extract::{Extractor, ExtractorConfig, SchedulerConfig};
use memloop_memory::prompt::Guidance;
use memloop_memory::session_notes::{SessionMemory, SessionMemoryError, SessionNotesConfig};
use memloop_paths::{AgentMemoryScopes, MemoryDirResolver, ResolvedMemoryDir};
use memloop_recall::{
    Bm25Params, HybridConfig, LlmSelectorConfig, RecallConfig, RerankConfig, Selector,
};
use memloop_store::{LocalDir, LocalPurpose, MemoryError, MemoryStore};
use memloop_subagents::{AgentDirs, LoadedAgents, SubAgentConfig, SubAgentTool, SubAgents};
use memloop_transcripts::{
    PastContextSection, TranscriptConfig, TranscriptDir, TranscriptHook, TranscriptSearchTool,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Why [`MemorySetup`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Resolving or opening the memory dir failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The session notes could not be created.
    #[error(transparent)]
    SessionNotes(#[from] SessionMemoryError),
    /// Parts this setup wires need something the store does not have (a directory on this
    /// machine for transcripts, for the dream's lock and session records, for the session
    /// notes). Every such part is listed, so one attempt tells the whole story: turn each off,
    /// or give a store that has what it needs.
    #[error("{}", unsupported_message(store, missing))]
    Unsupported {
        /// The store (its description).
        store: String,
        /// Each part the store cannot carry (never empty), in the order `attach` wires them.
        missing: Vec<MissingCapability>,
    },
}

/// One part [`MemorySetup::attach`] would wire that the store cannot carry: what it needs, why
/// the store lacks it, and the call that turns the part off. Listed in
/// [`SetupError::Unsupported`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingCapability {
    /// The part (`session transcripts`, `consolidation (dream)`, `compaction (session notes)`).
    pub part: &'static str,
    /// What it needs (`a directory on this machine for the transcripts`).
    pub needs: &'static str,
    /// What the store said ([`LocalDir::Elsewhere`]'s reasons, joined with `; ` when the part
    /// needs more than one thing).
    pub why: String,
    /// The `MemorySetup` call that turns the part off (`dream(false)`).
    pub switch: &'static str,
}

impl std::fmt::Display for MissingCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} needs {}, which the store does not have ({}); turn it off with MemorySetup::{}",
            self.part, self.needs, self.why, self.switch
        )
    }
}

/// [`SetupError::Unsupported`]'s text: the store, then one line per missing capability.
fn unsupported_message(store: &str, missing: &[MissingCapability]) -> String {
    let mut text = format!(
        "the memory store {store} cannot carry {} part(s) this setup wires; turn each off or use a store that has what it needs:",
        missing.len()
    );
    for m in missing {
        text.push_str("\n- ");
        text.push_str(&m.to_string());
    }
    text
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
    /// `None` when memory is switched off: nothing resolved, nothing opened.
    on: Option<Resolved>,
    selector: Option<Arc<dyn Selector>>,
    /// `None`: the forked extractor over the store.
    extractor: Option<Arc<dyn Extractor>>,
    /// `None`: file-backed notes per session ([`FileSessionNotes`](memloop_memory::session_notes::FileSessionNotes)).
    session_memory: Option<Arc<dyn SessionMemory>>,
    embedder: Option<Arc<dyn Embedder>>,
    /// Whether `embedder` is the local model found by default (not one the host set).
    local_embedder: bool,
    side_model: Option<Arc<dyn Model>>,
    rerank: bool,
    /// The re-ranking stage's settings (with `rerank` on).
    rerank_config: RerankConfig,
    recall: bool,
    /// The recall hook's budgets and limits.
    recall_config: RecallConfig,
    /// The side model's selector settings (with a side model).
    llm_selector: LlmSelectorConfig,
    /// The BM25 parameters of the default selector; `None`: `hybrid`'s.
    bm25: Option<Bm25Params>,
    /// The default selector's settings (the dense half's, and BM25's unless `bm25` is set).
    hybrid: HybridConfig,
    extraction: bool,
    /// The forked extractor's settings (`daily_log` and `team` are the setup's).
    extractor_config: ExtractorConfig,
    /// The extraction scheduler's settings (`saved_notice` is its `notice_in_conversation`).
    scheduler: SchedulerConfig,
    dream: bool,
    /// The dream's gates.
    dream_config: DreamConfig,
    compaction: Compaction,
    instructions: Option<InstructionConfig>,
    transcripts: TranscriptConfig,
    daily_log: bool,
    /// `None`: chosen from the compaction window ([`Guidance::for_window`]).
    guidance: Option<Guidance>,
    team_memory: bool,
    /// `None`: no sub-agents.
    subagents: Option<SubAgentConfig>,
    /// Models sub-agent definitions may name (`model: haiku`).
    subagent_models: Vec<(String, Arc<dyn Model>)>,
    working_dir: PathBuf,
    /// The project's config dir name (`.memloop` or `.claude`), for agent memory scopes.
    app_dir: &'static str,
    #[cfg(feature = "postgres")]
    team: Option<memloop_pg::TeamSync>,
}

/// Which compaction [`MemorySetup::attach`] wires.
#[derive(Clone)]
enum Compaction {
    /// Session notes with the default settings (when memory is on).
    Default,
    /// These settings.
    Custom(Box<(CompactConfig, SessionNotesConfig)>),
    /// None.
    Off,
}

/// What an enabled setup resolved, and its store.
#[derive(Clone)]
struct Resolved {
    resolved: ResolvedMemoryDir,
    project_dir: PathBuf,
    base: PathBuf,
    /// The store the host gave ([`MemorySetup::memory_store`]); `None`: the memory dir.
    given: Option<Arc<dyn MemoryStore>>,
    /// The memory dir's store, opened the first time the setup uses it (never with a given
    /// store: nothing is created on disk for a store that is not used); shared by clones.
    opened: Arc<OnceLock<Arc<dyn MemoryStore>>>,
}

impl Resolved {
    /// The store memories live in: the host's, else the memory dir, opened (and created) now
    /// if it was not yet.
    fn store(&self) -> Result<&Arc<dyn MemoryStore>, MemoryError> {
        if let Some(given) = &self.given {
            return Ok(given);
        }
        if let Some(opened) = self.opened.get() {
            return Ok(opened);
        }
        let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open_resolved(&self.resolved)?);
        // Two first uses racing open the dir twice; one store is kept, the other dropped.
        Ok(self.opened.get_or_init(|| store))
    }
}

impl std::fmt::Debug for MemorySetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySetup")
            .field("memory_dir", &self.memory_dir().map(|r| &r.dir))
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
    /// override dir), reading switches from `env`. With `MEMLOOP_DISABLE_AUTO_MEMORY` or
    /// `MEMLOOP_SIMPLE` truthy (in Claude Code's layout also `CLAUDE_CODE_DISABLE_AUTO_MEMORY` or
    /// `CLAUDE_CODE_SIMPLE`) nothing is resolved or opened: no disk access, and no `HOME` needed.
    pub fn with_resolver(resolver: MemoryDirResolver, env: EnvVars) -> Result<Self, SetupError> {
        let working_dir = resolver.project().to_path_buf();
        let app_dir = resolver.config_flavor().dir_name();
        let resolver = resolver.env(env.clone());
        let claude_layout = matches!(
            resolver.config_flavor(),
            memloop_paths::ConfigFlavor::ClaudeCode
        );
        let switched_off = memloop_paths::env::memory_switched_off_by(&env, claude_layout);
        // In Claude Code's layout, Claude Code's own extra guidelines stand in for memloop's.
        let env = match (
            claude_layout,
            env.get(memloop_paths::env::MEMORY_EXTRA_GUIDELINES),
            env.get(memloop_paths::env::CLAUDE_COWORK_MEMORY_EXTRA_GUIDELINES),
        ) {
            (true, None, Some(extra)) => {
                let extra = extra.to_owned();
                env.with(memloop_paths::env::MEMORY_EXTRA_GUIDELINES, extra)
            }
            _ => env,
        };
        let setting = if switched_off.is_some() {
            None
        } else {
            resolver.auto_memory_setting()
        };
        let on = if let Some(var) = switched_off {
            tracing::info!(
                var,
                "memory disabled by the environment; memory dir not resolved"
            );
            None
        } else if let Some((false, file)) = setting {
            tracing::info!(settings = %file.display(), "memory disabled by autoMemoryEnabled: false");
            None
        } else {
            let resolver = resolver.env(env.clone());
            // Resolved now (settings are read); the memory dir is opened, and created, only
            // when the setup uses it, and never when the host gives a store of its own.
            let resolved = resolver.resolve()?;
            Some(Resolved {
                project_dir: resolver.project_dir()?,
                base: resolver.base_dir()?,
                resolved,
                given: None,
                opened: Arc::default(),
            })
        };
        let team_memory = env.switch(memloop_paths::env::TEAM_MEMORY);
        let embedder = local_model(&env);
        let instructions = InstructionConfig::claude(&env);
        Ok(Self {
            env,
            on,
            selector: None,
            extractor: None,
            session_memory: None,
            local_embedder: embedder.is_some(),
            embedder,
            side_model: None,
            rerank: false,
            // The model's picks are what is surfaced: it decides what is useful.
            rerank_config: RerankConfig {
                backfill: false,
                ..RerankConfig::default()
            },
            recall: true,
            recall_config: RecallConfig::default(),
            llm_selector: LlmSelectorConfig::default(),
            bm25: None,
            hybrid: HybridConfig::default(),
            extraction: true,
            extractor_config: ExtractorConfig::default(),
            scheduler: SchedulerConfig::default(),
            dream: true,
            dream_config: DreamConfig::default(),
            compaction: Compaction::Default,
            instructions: Some(instructions),
            transcripts: TranscriptConfig::default(),
            daily_log: false,
            guidance: None,
            team_memory,
            subagents: Some(SubAgentConfig::default()),
            subagent_models: Vec::new(),
            working_dir,
            app_dir,
            #[cfg(feature = "postgres")]
            team: None,
        })
    }

    /// The store: the one given with [`memory_store`](Self::memory_store), else the memory dir,
    /// opened (and created) by the first call that needs it. `None` when memory is switched
    /// off, or when the memory dir cannot be opened (logged; [`try_store`](Self::try_store)
    /// says why).
    pub fn store(&self) -> Option<&Arc<dyn MemoryStore>> {
        self.try_store()
            .inspect_err(|e| tracing::warn!(error = %e, "the memory dir cannot be opened"))
            .ok()
            .flatten()
    }

    /// The store, as [`store`](Self::store) gives it, or why the memory dir cannot be opened
    /// (`Ok(None)` when memory is switched off).
    pub fn try_store(&self) -> Result<Option<&Arc<dyn MemoryStore>>, SetupError> {
        match &self.on {
            Some(on) => Ok(Some(on.store()?)),
            None => Ok(None),
        }
    }

    /// The working directory tools run in (the project dir the setup was made for).
    pub(crate) fn working_dir(&self) -> &Path {
        &self.working_dir
    }

    /// Where the memory dir is and which rule chose it (`None` when memory is switched off, or
    /// when the memories live in a store given with [`memory_store`](Self::memory_store)).
    /// Resolving creates nothing: the dir may not exist until the setup first uses it.
    pub fn memory_dir(&self) -> Option<&ResolvedMemoryDir> {
        self.on
            .as_ref()
            .filter(|o| o.given.is_none())
            .map(|o| &o.resolved)
    }

    /// Keep memories in `store` instead of the project's memory dir: every part this setup
    /// wires works over it (the memory tools, the memory section of the system prompt, recall,
    /// extraction, the daily log, team memory, consolidation), and the memory dir is never
    /// opened or created.
    ///
    /// With a store of the host's, nothing this setup wires uses disk but where the store says
    /// ([`MemoryStore::local_dir`]): session transcripts (`LocalPurpose::Transcripts`), the
    /// dream (its lock and session records), the default session notes and the full text of
    /// tool outputs cut by compaction (`LocalPurpose::SessionNotes`), the vector cache of
    /// hybrid recall (`LocalPurpose::VectorCache`; a store that gives none gets a per-store
    /// dir under the system temp dir, with a warning). When the store keeps no dir for one of
    /// the other parts, [`attach`](Self::attach) fails with [`SetupError::Unsupported`]
    /// listing every such part and the call that turns it off (session notes of the host's,
    /// [`session_memory`](Self::session_memory), need no directory: compaction then keeps no
    /// cut outputs). Sub-agents get no memory of their own (theirs are directories). Ignored
    /// when memory is switched off (the environment or the settings win).
    pub fn memory_store(mut self, store: Arc<dyn MemoryStore>) -> Self {
        if let Some(on) = &mut self.on {
            on.given = Some(store);
        }
        self
    }

    /// What writes memories after a turn (default: the [`ForkedExtractor`] over the store, a
    /// forked agent restricted to writing memories). The stop hook runs it in the background
    /// with a cursor, a trailing run and the `MemoriesSaved` events, whatever the extractor.
    pub fn extractor(mut self, extractor: Arc<dyn Extractor>) -> Self {
        self.extractor = Some(extractor);
        self
    }

    /// The session notes compaction summarises with (default: a [`FileSessionNotes`](memloop_memory::session_notes::FileSessionNotes) per
    /// session, in the project dir, or where a store of the host's keeps session notes). Every agent attached afterwards uses this one, so give a
    /// new one for each session. The notes hook asks it when to update
    /// ([`SessionMemory::should_update`]) and the agent gets the `edit_session_notes` tool over
    /// its [`notes_path`](SessionMemory::notes_path). Compaction is what reads the notes: with
    /// [`without_compaction`](Self::without_compaction), or compaction switched off by the
    /// environment, they are neither read nor updated.
    pub fn session_memory(mut self, notes: Arc<dyn SessionMemory>) -> Self {
        self.session_memory = Some(notes);
        self
    }

    /// `<base>/projects/<slug>`: where per-session data (notes) lives (`None` when memory is
    /// switched off).
    pub fn project_dir(&self) -> Option<&Path> {
        self.on.as_ref().map(|o| o.project_dir.as_path())
    }

    /// Whether memory is on (no switch of [`memory_switched_off_by`](memloop_paths::env::memory_switched_off_by) is truthy and no settings file
    /// says `autoMemoryEnabled: false`).
    pub fn enabled(&self) -> bool {
        self.on.is_some()
    }

    /// The recall selector (default: the [`DefaultSelector`] over the store, BM25 or, when an
    /// [`embedder`](Self::embedder) is set, hybrid). A selector given here wins over the side
    /// model and ignores [`bm25_config`](Self::bm25_config), [`hybrid_config`](Self::hybrid_config),
    /// [`llm_selector_config`](Self::llm_selector_config) and [`rerank_config`](Self::rerank_config)
    /// (they configure the selectors this setup builds); [`recall_config`](Self::recall_config)
    /// still applies.
    pub fn selector(mut self, selector: Arc<dyn Selector>) -> Self {
        self.selector = Some(selector);
        self
    }

    /// Recall semantically: the default selector becomes a
    /// [`HybridSelector`](memloop_recall::HybridSelector) (BM25 fused with `embedder`'s
    /// similarity), its vectors cached where the store says (beside a memory dir; see
    /// [`vector_cache_for`](memloop_recall::vector_cache_for)). Memories not embedded yet are
    /// embedded during the first selections, within each selection's time budget; call
    /// [`HybridSelector::warm`](memloop_recall::HybridSelector::warm) on your own selector and
    /// pass it to [`selector`](Self::selector) to embed them up front. The selector has the
    /// settings of [`hybrid_config`](Self::hybrid_config) and [`bm25_config`](Self::bm25_config)
    /// (default: a vector per passage of a long memory, no folder lift).
    ///
    /// With the `candle` feature, a local model configured or fetched is used when no embedder
    /// is set: the directory `MEMLOOP_EMBED_MODEL` names, else the first known model in the
    /// Hugging Face cache (`memloop models fetch multilingual-e5-small` puts one there; see
    /// `memloop::candle::default_model`). Its weights load on
    /// first use; a broken one leaves recall on BM25 with a `RecallDegraded` event saying why.
    /// [`local_model(false)`](Self::local_model) turns that off.
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self.local_embedder = false;
        self
    }

    /// Get recall's embedder ready now ([`Embedder::ready`]: a local model loads its weights,
    /// a second or two), so that the first turn's recall does not spend its time budget on it.
    /// Without it the load starts when the first agent is attached and a first turn that comes
    /// before it ends ranks with BM25 alone. A model that cannot load is an error here (recall
    /// itself would fall back to BM25 and say why).
    pub async fn ready(&self) -> Result<(), memloop_core::embed::EmbedError> {
        match &self.embedder {
            Some(embedder) => embedder.ready().await,
            None => Ok(()),
        }
    }

    /// Whether recall uses the local embedding model configured or fetched when no
    /// [`embedder`](Self::embedder) is set (`candle` feature; default on). Off: BM25, unless an
    /// embedder is set.
    pub fn local_model(mut self, on: bool) -> Self {
        match (on, self.local_embedder) {
            (false, true) => {
                self.embedder = None;
                self.local_embedder = false;
            }
            (true, false) if self.embedder.is_none() => {
                self.embedder = local_model(&self.env);
                self.local_embedder = self.embedder.is_some();
            }
            _ => {}
        }
        self
    }

    /// A small, fast model for side queries (Claude Code uses its small model): recall then
    /// selects with one side query to it ([`LlmSelector`]), with the lexical selector (or the
    /// hybrid one, with an [`embedder`](Self::embedder)) as the fallback when the query fails
    /// or takes longer than [`llm_selector_config`](Self::llm_selector_config)'s timeout
    /// (default 10 s). An explicit [`selector`](Self::selector) still wins.
    pub fn side_model(mut self, model: Arc<dyn Model>) -> Self {
        self.side_model = Some(model);
        self
    }

    /// With a [`side_model`](Self::side_model): have it re-rank the lexical (or hybrid)
    /// selector's best 20 memories ([`RerankSelector`]) instead of choosing from the newest 200
    /// (default off). Every memory can then be reached and the side query stays small. The
    /// model's picks are what is surfaced (no backfill: it decides what is useful); when it
    /// fails, the lexical selector's best are surfaced. [`rerank_config`](Self::rerank_config)
    /// changes the short list's length and the backfill.
    pub fn rerank(mut self, on: bool) -> Self {
        self.rerank = on;
        self
    }

    /// The re-ranking stage's settings, used when [`rerank`](Self::rerank) is on with a
    /// [`side_model`](Self::side_model) (this call does not turn it on): how many of the lexical
    /// selector's best the model sees ([`RerankConfig::shortlist`], default 20) and whether the
    /// rest of that list fills the slots the model left ([`RerankConfig::backfill`]; this setup's
    /// default is off, [`RerankConfig::default`]'s is on). No environment variable changes
    /// them.
    pub fn rerank_config(mut self, config: RerankConfig) -> Self {
        self.rerank_config = config;
        self
    }

    /// The side model's selection settings ([`LlmSelectorConfig`], default
    /// [`LlmSelectorConfig::default`]: 256 output tokens, a manifest of the newest 200
    /// memories, a 10 s timeout, [`SELECTOR_PROMPT`](memloop_recall::SELECTOR_PROMPT)), for
    /// [`side_model`](Self::side_model): the [`LlmSelector`] takes them, whether it chooses
    /// alone or [re-ranks](Self::rerank), and its `timeout` is also when the lexical fallback
    /// takes over. Without a side model they are unused. No environment variable changes them.
    pub fn llm_selector_config(mut self, config: LlmSelectorConfig) -> Self {
        self.llm_selector = config;
        self
    }

    /// The BM25 parameters of the default selector ([`Bm25Params`], default
    /// [`Bm25Params::default`], tuned on LoCoMo): `k1`, `b`, the field weights, bigrams,
    /// coordination, the language, pseudo-relevance feedback, and the folder lift
    /// ([`Bm25Params::dir_weight`], default 0: off). Used by BM25 alone and by the hybrid
    /// selector's lexical half (with an [`embedder`](Self::embedder)); they replace
    /// [`hybrid_config`](Self::hybrid_config)'s `bm25` field, whichever is called first. Turn the
    /// folder lift on for memory dirs that file related memories together (a folder per
    /// session, project or topic, a summary next to the details): a memory then gains
    /// `dir_weight` × the score of the best other memory in its folder. No environment variable
    /// changes them.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use memloop::MemorySetup;
    /// use memloop::memory::recall::Bm25Params;
    /// let memory = MemorySetup::for_project(std::env::current_dir()?)?
    ///     .bm25_config(Bm25Params { dir_weight: 0.5, ..Bm25Params::default() });
    /// # let _ = memory; Ok(()) }
    /// ```
    pub fn bm25_config(mut self, params: Bm25Params) -> Self {
        self.bm25 = Some(params);
        self
    }

    /// The hybrid selector's settings ([`HybridConfig`], default [`HybridConfig::default`]:
    /// weighted fusion with dense 0.3, 50 candidates per ranking, a 2 s embedding budget per
    /// selection, a similarity floor of 0.2, no dense folder lift, passage vectors on), used
    /// when recall is hybrid (an [`embedder`](Self::embedder), or the local model). Its `bm25`
    /// field is BM25's parameters, for BM25 alone too, unless
    /// [`bm25_config`](Self::bm25_config) is called, which wins. No environment variable changes
    /// them.
    pub fn hybrid_config(mut self, config: HybridConfig) -> Self {
        self.hybrid = config;
        self
    }

    /// The default selector's settings: [`hybrid_config`](Self::hybrid_config)'s, with
    /// [`bm25_config`](Self::bm25_config)'s BM25 parameters when set.
    fn selector_config(&self) -> HybridConfig {
        HybridConfig {
            bm25: self.bm25.unwrap_or(self.hybrid.bm25),
            ..self.hybrid.clone()
        }
    }

    /// The recall hook's budgets and limits ([`RecallConfig`], default
    /// [`RecallConfig::default`]): memories surfaced per turn (`max_files`, 5), lines and bytes
    /// shown of each (`max_lines` 200, `max_bytes` 4,096), bytes surfaced per session until
    /// compaction (`session_budget_bytes`, 60,000), whether a one-word message is skipped
    /// (`skip_single_word`, on), and which tools' whole-file reads count as "already read"
    /// (`read_tools`). The environment's switches still win: with memory switched off
    /// (`MEMLOOP_DISABLE_AUTO_MEMORY`, `MEMLOOP_SIMPLE`, ...) there is no recall whatever
    /// `enabled` says, and `enabled: false` turns recall off like [`recall(false)`](Self::recall).
    pub fn recall_config(mut self, config: RecallConfig) -> Self {
        self.recall_config = config;
        self
    }

    /// Whether recall surfaces relevant memories each turn (default on).
    pub fn recall(mut self, on: bool) -> Self {
        self.recall = on;
        self
    }

    /// Turn background extraction on or off (default on).
    pub fn extraction(mut self, on: bool) -> Self {
        self.extraction = on;
        self
    }

    /// The default extractor's settings ([`ExtractorConfig`], default
    /// [`ExtractorConfig::default`]: 5 model calls, the newest 40 messages looked at, a manifest
    /// of the newest 200 memories, 4,096 output tokens per request). Its `daily_log` and `team`
    /// fields are replaced by this setup's [`daily_log`](Self::daily_log) and
    /// [`team_memory`](Self::team_memory), which shape the main agent's prompt too. Unused with
    /// an [`extractor`](Self::extractor) of the host's. No environment variable changes them.
    pub fn extractor_config(mut self, config: ExtractorConfig) -> Self {
        self.extractor_config = config;
        self
    }

    /// When extraction runs ([`SchedulerConfig`], default [`SchedulerConfig::default`]: every
    /// eligible turn, a 60 s default drain, no saved notice in the conversation). Its
    /// `notice_in_conversation` is what [`saved_notice`](Self::saved_notice) sets: the later
    /// call wins. The environment's switches still win: with memory switched off there is no
    /// extraction whatever `enabled` says; `enabled: false` turns it off like
    /// [`extraction(false)`](Self::extraction).
    pub fn scheduler_config(mut self, config: SchedulerConfig) -> Self {
        self.scheduler = config;
        self
    }

    /// Put a short `Memory saved: a.md, b.md` line in the conversation (on the next user
    /// message) when the extractor saved memories, besides the `MemoriesSaved` event. Default
    /// off, as in Claude Code, whose notice is shown to the user but never sent to the model.
    pub fn saved_notice(mut self, on: bool) -> Self {
        self.scheduler.notice_in_conversation = on;
        self
    }

    /// Daily-log mode (default off): the main agent's memory guidance and the extractor both
    /// append one line per fact to today's log (`logs/YYYY/MM/YYYY-MM-DD.md`, with the
    /// `memory_log_append` tool the main agent gets too) instead of writing topic files; the
    /// dream distils the logs into topic files.
    pub fn daily_log(mut self, on: bool) -> Self {
        self.daily_log = on;
        self
    }

    /// How the memory guidance describes the kinds of memory. Without this call: brief when
    /// [`compaction`](Self::compaction) names a window below
    /// [`Guidance::BRIEF_BELOW_TOKENS`], in full otherwise.
    pub fn guidance(mut self, guidance: Guidance) -> Self {
        self.guidance = Some(guidance);
        self
    }

    /// The guidance this setup gives: the one set, or the one that fits the compaction window.
    fn chosen_guidance(&self) -> Guidance {
        match (self.guidance, &self.compaction) {
            (Some(guidance), _) => guidance,
            (None, Compaction::Custom(custom)) => Guidance::for_window(custom.0.context_window),
            (None, _) => Guidance::Full,
        }
    }

    /// Give the agent the `agent` tool over the sub-agent definitions found on disk (default on;
    /// see [`agent_dirs`](Self::agent_dirs)). Nothing is added when no definition is found.
    /// Each sub-agent gets the memory its definition asks for (`memory: user | project |
    /// local`, in its own dir) and no other: it never gets the main agent's memory tools, and
    /// its writes into the main agent's memory dir are refused.
    pub fn subagents(mut self, on: bool) -> Self {
        let config = self.subagents.take().unwrap_or_default();
        self.subagents = on.then_some(config);
        self
    }

    /// Sub-agents, with these limits (depth, iterations, time, background runs).
    pub fn subagent_config(mut self, config: SubAgentConfig) -> Self {
        self.subagents = Some(config);
        self
    }

    /// Run sub-agent definitions that name `name` (`model: haiku`) on `model`; a definition
    /// naming a model not registered here runs on the main agent's (with a warning).
    pub fn subagent_model(mut self, name: impl Into<String>, model: Arc<dyn Model>) -> Self {
        self.subagent_models.push((name.into(), model));
        self
    }

    /// Where sub-agent definitions are read from: the project's `.memloop/agents/` and
    /// `.claude/agents/`, then the user's `~/.memloop/agents/` and `~/.claude/agents/`
    /// (`MEMLOOP_HOME` and `CLAUDE_CONFIG_DIR` move them); the project's win on a name clash.
    pub fn agent_dirs(&self) -> AgentDirs {
        AgentDirs::standard(&self.working_dir, &self.env)
    }

    /// Read the sub-agent definitions now (what [`attach`](Self::attach) does), with the
    /// files skipped and why.
    pub fn load_agents(&self) -> LoadedAgents {
        self.agent_dirs().load()
    }

    /// The sub-agents' memory: scopes under the config home and the project, the main
    /// agent's memory dir and project dir protected; off when memory is, and with a store of
    /// the host's (a sub-agent's memory is a directory, and with such a store nothing this
    /// setup wires uses disk the store did not give).
    fn agent_memory(&self) -> AgentMemory {
        let Some(on) = &self.on else {
            return AgentMemory::off();
        };
        if let Some(store) = &on.given {
            tracing::info!(store = %store.describe(), "memories live in the host's store: sub-agents get no memory of their own");
            return AgentMemory::off();
        }
        // Keyed by the canonical git root, so a run from a subdirectory (or a worktree) finds
        // the same project and local scopes.
        AgentMemory::new(AgentMemoryScopes::new(
            &on.base,
            memloop_paths::canonical_project_root(&self.working_dir),
            self.app_dir,
        ))
        .protect(&on.resolved.dir)
        .protect(&on.project_dir)
    }

    /// Turn consolidation on or off (default on).
    pub fn dream(mut self, on: bool) -> Self {
        self.dream = on;
        self
    }

    /// The dream's gates ([`DreamConfig`], default [`DreamConfig::default`]: 24 h since the
    /// last consolidation, a session scan at most every 10 minutes, 5 sessions touched since,
    /// a lock stale after 1 h). The environment's switches still win: with memory switched off
    /// there is no dream whatever `enabled` says; `enabled: false` turns it off like
    /// [`dream(false)`](Self::dream).
    pub fn dream_config(mut self, config: DreamConfig) -> Self {
        self.dream_config = config;
        self
    }

    /// Keep session notes and compact with them, with these settings (the env switches of
    /// compaction are applied on top). Without this call, memory on means session notes and
    /// compaction with the defaults ([`default_notes_config`](Self::default_notes_config)), as
    /// in Claude Code; [`without_compaction`](Self::without_compaction) opts out.
    pub fn compaction(mut self, compact: CompactConfig, notes: SessionNotesConfig) -> Self {
        self.compaction = Compaction::Custom(Box::new((compact, notes)));
        self
    }

    /// No session notes and no compaction.
    pub fn without_compaction(mut self) -> Self {
        self.compaction = Compaction::Off;
        self
    }

    /// Load project instructions (CLAUDE.md / AGENTS.md family, with `@includes`) from the
    /// project dir into a cached system-prompt section placed before the memory section. On by
    /// default with [`InstructionConfig::claude`] (CLAUDE.md), as Claude Code does; this call
    /// picks another family or settings.
    pub fn instructions(mut self, config: InstructionConfig) -> Self {
        self.instructions = Some(config);
        self
    }

    /// Load no project instructions.
    pub fn without_instructions(mut self) -> Self {
        self.instructions = None;
        self
    }

    /// Keep session transcripts (default on, 30 days): every conversation is appended to
    /// `<project dir>/<session id>.jsonl` (where the store keeps transcripts), the main agent
    /// gets the `transcript_search` tool over past sessions and the "searching past context"
    /// guidance, and transcripts older than the retention are deleted when an agent is attached.
    /// `TranscriptConfig { enabled: false, .. }` turns all of it off. What the search returns is
    /// always redacted; `redact_on_disk` (or `MEMLOOP_REDACT_TRANSCRIPTS=1`) redacts the JSONL
    /// too.
    pub fn transcripts(mut self, config: TranscriptConfig) -> Self {
        self.transcripts = config;
        self
    }

    /// Where this setup keeps session transcripts (`None` when memory or transcripts are off,
    /// or the store keeps none).
    pub fn transcript_dir(&self) -> Option<TranscriptDir> {
        if !self.transcripts.enabled {
            return None;
        }
        TranscriptDir::for_store(self.store()?.as_ref()).ok()
    }

    /// The conversation of an earlier session, read back from its transcript (the messages
    /// after its last compaction or clear), to resume it: pass it to
    /// [`AgentBuilder::messages`] with the same `session_id` and the transcript continues where
    /// it stopped; recall rebuilds what that conversation already surfaced.
    pub fn resume(
        &self,
        session_id: &str,
    ) -> Result<Vec<memloop_core::message::Message>, SetupError> {
        let dir = self.transcript_dir().ok_or_else(|| {
            MemoryError::NotFound(format!("session {session_id} (no transcripts kept)"))
        })?;
        Ok(dir.load(session_id)?.conversation())
    }

    /// Private and team memory in one memory dir, as Claude Code lays them out (default: the
    /// `MEMLOOP_TEAM_MEMORY` switch): the dir's `team/` subdirectory is the team's, with its own
    /// index (`team/MEMORY.md`). The memory section shows both indexes and the rule for which
    /// memory goes where (`user` memories private, shared conventions, project facts and
    /// references to the team), the extractor chooses between them (`team/<topic>`), the store
    /// refuses `user` memories under `team/`, and the secret filter guards both. A team store
    /// connected with `connect_team` (feature `postgres`) then syncs only `team/`: private
    /// memories never leave the machine.
    pub fn team_memory(mut self, on: bool) -> Self {
        self.team_memory = on;
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
    /// `project_id` (default: the project's git `origin` URL, else `dir:` and its canonical path) and sync it with
    /// this memory dir: with [`team_memory`](Self::team_memory) on, with its `team/`
    /// subdirectory only. `Ok(None)` when no URL is configured or memory is switched off. Hosts that want to keep working on
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
        // Memory switched off: there is no local dir to sync.
        let Some(on) = &self.on else {
            return Ok(None);
        };
        if let Some(given) = &on.given {
            return Err(memloop_pg::PgError::Db(format!(
                "team sync syncs the project's memory dir, and memories live in {}: sync that store yourself",
                given.describe()
            )));
        }
        let config = match project_id {
            Some(id) => memloop_pg::PgConfig::new(url, id),
            None => memloop_pg::PgConfig::for_project_dir(url, &self.working_dir),
        };
        let team = memloop_pg::PgMemoryStore::open(config.env(&self.env)).await?;
        let dir = match self.team_memory {
            true => on.resolved.dir.join(memloop_store::TEAM_DIR),
            false => on.resolved.dir.clone(),
        };
        let local =
            FileMemoryStore::open(&dir).map_err(|e| memloop_pg::PgError::Db(e.to_string()))?;
        Ok(Some(memloop_pg::TeamSync::new(local, team)))
    }

    /// Default session-notes settings for this project (`<project_dir>`, custom templates from
    /// `<base>/session-memory/config/`); with a store of the host's
    /// ([`memory_store`](Self::memory_store)), in the dir the store gives for
    /// `LocalPurpose::SessionNotes`. `None` when memory is switched off, or that store keeps
    /// no session notes on this machine.
    pub fn default_notes_config(&self) -> Option<SessionNotesConfig> {
        let on = self.on.as_ref()?;
        let dir = match &on.given {
            None => on.project_dir.clone(),
            Some(store) => match store.local_dir(LocalPurpose::SessionNotes) {
                LocalDir::Dir(dir) => dir,
                LocalDir::Elsewhere(_) => return None,
            },
        };
        Some(SessionNotesConfig::new(dir).with_config_home(&on.base))
    }

    /// Wire memory into `builder`. With memory disabled by the environment, only compaction (if
    /// configured) and sub-agents (without memory) are added: no memory tools, no index, no
    /// recall, no extraction, no dream.
    ///
    /// The agent gets every tool its memory forks use (`memory_read`, `memory_write`,
    /// `memory_delete`, and `edit_session_notes` with compaction), because a fork declares its
    /// parent's tools unchanged: that way the extractor's, the consolidator's and the notes
    /// updater's requests share the agent's cached prompt prefix. Each fork's gate limits what
    /// it may call; `edit_session_notes` refuses every caller but the notes updater.
    pub fn attach(&self, mut builder: AgentBuilder) -> Result<AgentBuilder, SetupError> {
        // The conventions' switch for message content on the spans: opt in, and never without
        // the credential redaction every stored text gets.
        if memloop_core::telemetry::ContentCapture::requested(&self.env) {
            builder =
                builder.capture_content(memloop_core::telemetry::ContentCapture::new(|text| {
                    memloop_secrets::redact_secrets(text).0
                }));
        }
        if let Some(config) = &self.instructions {
            builder = builder.section(Arc::new(InstructionsSection::live(
                InstructionLoader::new(config.clone()),
                self.working_dir.clone(),
                LoadOptions::default(),
            )));
        }
        if let Some(parts) = self.memory_parts()? {
            for tool in parts.tools {
                builder = builder.tool(tool);
            }
            builder = builder.section(parts.section);
            builder = self.attach_transcripts(parts.store.as_ref(), builder);
            for hook in parts.hooks {
                builder = builder.hook(hook);
            }
        } else {
            tracing::info!("memory disabled by the environment or settings");
        }
        if let Some(config) = &self.subagents {
            let loaded = self.load_agents();
            if loaded.definitions.is_empty() {
                tracing::debug!("no sub-agent definitions found; no `agent` tool");
            } else {
                let mut tool = SubAgentTool::new(loaded.definitions)
                    .config(config.clone())
                    .extension(Arc::new(self.agent_memory()));
                for (name, model) in &self.subagent_models {
                    tool = tool.model(name.clone(), model.clone());
                }
                builder = builder.subagents(Arc::new(tool));
            }
        }
        let session = builder.session_id().to_owned();
        // The agent shares the compactor's context-window handle (see AgentBuilder::build).
        if let Some(parts) = self.compaction_parts(&session, builder.counter())? {
            if let Some(dir) = parts.spill_dir {
                builder = builder.spill_dir(dir);
            }
            builder = builder.compactor(parts.compactor);
            if let Some((tool, hook)) = parts.notes {
                builder = builder.tool(tool).hook(hook);
            }
        }
        Ok(builder)
    }

    /// The parts that need a directory on this machine get one from `store`, or attaching
    /// fails listing every part that gets none (never a part silently left out, never one
    /// missing part per attempt). `given`: the store is the host's (the default session notes
    /// then live where it says).
    fn check_capabilities(&self, store: &dyn MemoryStore, given: bool) -> Result<(), SetupError> {
        let mut needs: Vec<(&'static str, &'static str, Vec<LocalPurpose>, &'static str)> =
            Vec::new();
        if self.transcripts.enabled {
            needs.push((
                "session transcripts",
                "a directory on this machine for the transcripts",
                vec![LocalPurpose::Transcripts],
                "transcripts(TranscriptConfig { enabled: false, .. })",
            ));
        }
        if self.dream {
            needs.push((
                "consolidation (dream)",
                "a directory on this machine for its lock and session records",
                vec![LocalPurpose::Locks, LocalPurpose::SessionRecords],
                "dream(false)",
            ));
        }
        // The default notes, kept while automatic compaction is on, live where a host's store
        // says; notes of the host's need no directory.
        let compact = CompactConfig::default().with_env(&self.env);
        if given
            && matches!(self.compaction, Compaction::Default)
            && self.session_memory.is_none()
            && !compact.disabled
            && !compact.auto_disabled
        {
            needs.push((
                "compaction (session notes)",
                "a directory on this machine for the session notes",
                vec![LocalPurpose::SessionNotes],
                "without_compaction() (or give notes of your own with session_memory)",
            ));
        }
        let missing: Vec<MissingCapability> = needs
            .into_iter()
            .filter_map(|(part, what, purposes, switch)| {
                let whys: Vec<String> = purposes
                    .into_iter()
                    .filter_map(|purpose| match store.local_dir(purpose) {
                        LocalDir::Elsewhere(why) => Some(why),
                        LocalDir::Dir(_) => None,
                    })
                    .fold(Vec::new(), |mut whys, why| {
                        if !whys.contains(&why) {
                            whys.push(why);
                        }
                        whys
                    });
                (!whys.is_empty()).then(|| MissingCapability {
                    part,
                    needs: what,
                    why: whys.join("; "),
                    switch,
                })
            })
            .collect();
        match missing.is_empty() {
            true => Ok(()),
            false => Err(SetupError::Unsupported {
                store: store.describe().to_string(),
                missing,
            }),
        }
    }

    /// The transcript writer, the search tool and its guidance, after applying the retention.
    fn attach_transcripts(&self, store: &dyn MemoryStore, builder: AgentBuilder) -> AgentBuilder {
        if !self.transcripts.enabled {
            return builder;
        }
        let dir = match TranscriptDir::for_store(store) {
            Ok(dir) => dir,
            Err(why) => {
                tracing::info!(reason = %why, "no session transcripts");
                return builder;
            }
        };
        if let Some(retention) = self.transcripts.retention {
            if let Err(e) = dir.prune(
                retention,
                std::time::SystemTime::now(),
                builder.session_id(),
            ) {
                tracing::warn!(error = %e, "could not apply the transcript retention");
            }
        }
        let dir = dir.with_redaction_on_disk(
            self.transcripts.redact_on_disk || memloop_paths::env::redact_transcripts(&self.env),
        );
        builder
            .section(Arc::new(PastContextSection))
            .tool(Arc::new(TranscriptSearchTool::new(dir.clone())))
            .hook(Arc::new(TranscriptHook::new(dir)))
    }
}

/// The local embedding model configured or fetched (`candle` feature), opened lazily.
#[cfg(feature = "candle")]
fn local_model(env: &EnvVars) -> Option<Arc<dyn Embedder>> {
    let found = memloop_candle::default_model(env)?;
    tracing::debug!(model = %found.name, dir = %found.dir.display(), source = found.source, "local embedding model");
    Some(Arc::new(found.embedder))
}

/// Without the `candle` feature there is no local model.
#[cfg(not(feature = "candle"))]
fn local_model(_: &EnvVars) -> Option<Arc<dyn Embedder>> {
    None
}
