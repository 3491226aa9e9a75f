//! Which projects the server may serve, and where their memory lives.
//!
//! A project path must be absolute, an existing directory, and (unless the server was started
//! with [`McpConfig::allow_any_project`]) inside one of the roots the server was started for.
//! Its memory dir is chosen by memloop's normal resolution rules
//! ([`MemoryDirResolver`]); its id is the first 12 hex characters of the SHA-256 of its canonical
//! path. Its memories live in that dir, or, when the server was given [`ProjectStores`] (the
//! CLI's `--database-url`), in the store those open for it.

use crate::access::{Access, Denied, Effect, Grant};
use crate::batch::AtomicBatches;
use crate::bounded::Bounded;
use crate::key::{MemoryKey, OwnerError, Reach, check_owner, claim_owner, holds_nothing};
use memloop_core::embed::Embedder;
use memloop_files::{FileMemoryStore, StoreConfig};
use memloop_host::env::EnvVars;
use memloop_paths::{MemoryDirResolver, ResolutionRule, ResolvedMemoryDir, canonical_project_root};
use memloop_recall::DefaultSelector;
use memloop_store::{MemoryError, MemoryStore, ScanCache, WriteLimits};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::Mutex;

/// The future [`ProjectStores::open`] returns.
pub type OpenFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Arc<dyn MemoryStore>, MemoryError>> + Send + 'a>>;

/// The future [`ProjectStores::claim_legacy`] returns.
pub type ClaimFuture<'a> = Pin<Box<dyn Future<Output = Result<(), MemoryError>> + Send + 'a>>;

/// The future [`ProjectStores::ready`] returns.
pub type ReadyFuture<'a> = Pin<Box<dyn Future<Output = Result<(), MemoryError>> + Send + 'a>>;

/// The future [`ProjectStores::open_store`] returns.
pub type OpenStoreFuture<'a> =
    Pin<Box<dyn Future<Output = Result<OpenedStore, MemoryError>> + Send + 'a>>;

/// A store [`ProjectStores::open_store`] opened, and its batch writer when it has one.
#[derive(Clone)]
pub struct OpenedStore {
    /// The store the tools use.
    pub store: Arc<dyn MemoryStore>,
    /// The same store's transactions: with them a `context_save` batch is one transaction and
    /// its idempotency key is recorded in it; without, the batch is checked whole, then written
    /// entry by entry (see [`AtomicBatches`]).
    pub batches: Option<Arc<dyn AtomicBatches>>,
}

impl OpenedStore {
    /// A store without transactions.
    pub fn plain(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            store,
            batches: None,
        }
    }

    /// A store that is also its own batch writer.
    pub fn atomic<S: MemoryStore + AtomicBatches + 'static>(store: Arc<S>) -> Self {
        Self {
            store: store.clone(),
            batches: Some(store),
        }
    }
}

/// Where the projects' memories live when not in their memory dirs: the CLI's
/// `memloop mcp --database-url URL` passes one that opens a PostgreSQL team store per project.
/// The tools only see the `dyn MemoryStore` it returns, whichever backend it is.
pub trait ProjectStores: Send + Sync {
    /// A short description for logs, and for answers when the server reveals its store
    /// ([`McpConfig::reveal_store`]; e.g. the database URL without its password).
    fn describe(&self) -> String;

    /// The kind of store, all that answers name by default (`postgres`): no URL, host, user
    /// or path.
    fn kind(&self) -> &'static str;

    /// Whether the store answers now (the server's readiness, `GET /health`). The default has
    /// nothing to check.
    fn ready(&self) -> ReadyFuture<'_> {
        Box::pin(async { Ok(()) })
    }

    /// The key the memory of the project at `canonical` (a canonical directory) is stored
    /// under, and every project path that maps to it: the server authorizes on it, and
    /// [`open_store`](Self::open_store) must open exactly that key (`project.key`). The
    /// default says [`Reach::Anyone`], which only a token for every project covers: a store
    /// that lets limited tokens in says which paths share each key.
    fn key(&self, canonical: &Path) -> Result<MemoryKey, MemoryError> {
        Ok(MemoryKey {
            id: canonical.to_string_lossy().into_owned(),
            reach: Reach::Anyone,
        })
    }

    /// Take over memories older versions stored for `project` under another key (the team
    /// store's pre-schema-6 ids, named after a directory's base name: any directory of that
    /// name maps to them). The server calls it only for a write by a token whose grant covers
    /// every project, never for a read. The default has nothing to take over.
    fn claim_legacy<'a>(&'a self, project: &'a Project) -> ClaimFuture<'a> {
        let _ = project;
        Box::pin(async { Ok(()) })
    }

    /// Open the store holding `project`'s memories, with `limits` as its write rules' limits
    /// ([`MemoryStore::write_limits`]: the server's per-memory cap, `McpLimits::max_entry_bytes`,
    /// is enforced by the store's own write rules, not checked apart). Called once per project
    /// (the server keeps the store open); an error is reported as `available: false` and
    /// retried on the next call.
    fn open<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenFuture<'a>;

    /// [`open`](Self::open), with the store's batch writer when it has one (the default has
    /// none). The server calls this one: a backend with transactions overrides it
    /// ([`OpenedStore::atomic`]), e.g. the PostgreSQL team store with the `postgres` feature.
    fn open_store<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenStoreFuture<'a> {
        Box::pin(async move { Ok(OpenedStore::plain(self.open(project, limits).await?)) })
    }

    /// How the store's connection pool is used now, for the metrics (`None`, the default: the
    /// store has no pool, or it is not open yet).
    fn pool_use(&self) -> Option<crate::metrics::PoolUse> {
        None
    }
}

/// How the server was started: the roots it serves and how it resolves memory dirs.
#[derive(Clone, Default)]
pub struct McpConfig {
    /// Project paths must lie inside one of these (canonicalised when the server starts).
    /// The CLI passes the current directory unless `--root` is given.
    pub roots: Vec<PathBuf>,
    /// Serve any existing project directory, not only those under [`roots`](Self::roots).
    pub allow_any_project: bool,
    /// The environment the resolver reads (`MEMLOOP_HOME`, `MEMLOOP_MEMORY_DIR`, ...).
    pub env: EnvVars,
    /// Resolve memory dirs the way Claude Code does (`~/.claude/projects/...`).
    pub claude: bool,
    /// One memory dir for every project (the CLI's `--memory-dir`).
    pub memory_dir: Option<PathBuf>,
    /// Size caps on entries, batches and answers.
    pub limits: crate::answer::McpLimits,
    /// `init_project` leaves the project's `CLAUDE.md` alone (the CLI's `--no-claude-md`).
    pub no_claude_md: bool,
    /// When set, `context_search` ranks with the hybrid selector (BM25 fused with these
    /// embeddings; vectors cached beside each memory dir), else with BM25 alone.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The models that write each saved entry's abstract (L0) and overview (L1) in the
    /// background; off by default.
    pub summaries: crate::summaries::SummaryConfig,
    /// Where each project's memories live: `None` (the default) for its memory dir, else these
    /// stores (e.g. a PostgreSQL team store per project). The global memory stays a directory.
    pub stores: Option<Arc<dyn ProjectStores>>,
    /// The memory budget of the per-project caches (headers, BM25 postings, vectors), in bytes;
    /// `None` for [`DEFAULT_CACHE_BYTES`]. Past it the least recently used projects' caches are
    /// dropped whole, and rebuilt from their store when needed again (the CLI's `--cache-mib`).
    pub cache_bytes: Option<usize>,
    /// Answers name the store's description ([`ProjectStores::describe`]: the database URL
    /// without its password) and the server's memory dirs; by default (`false`) they name the
    /// store's kind only (`postgres`, `files`) and no server path.
    pub reveal_store: bool,
}

/// The default memory budget of the per-project caches ([`McpConfig::cache_bytes`]): 256 MiB,
/// sized for a laptop.
pub const DEFAULT_CACHE_BYTES: usize = 256 * 1024 * 1024;

impl std::fmt::Debug for McpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConfig")
            .field("roots", &self.roots)
            .field("allow_any_project", &self.allow_any_project)
            .field("claude", &self.claude)
            .field("memory_dir", &self.memory_dir)
            .field("limits", &self.limits)
            .field("no_claude_md", &self.no_claude_md)
            .field(
                "embedder",
                &self.embedder.as_ref().map(|e| e.model_id().to_owned()),
            )
            .field("summaries", &self.summaries)
            .field("stores", &self.stores.as_ref().map(|s| s.describe()))
            .field("cache_bytes", &self.cache_bytes)
            .finish_non_exhaustive()
    }
}

/// Why a project path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("project path refused: {0}")]
pub struct ProjectRefused(pub String);

/// A validated project and where its memory dir is.
#[derive(Debug, Clone)]
pub struct Project {
    /// First 12 hex characters of SHA-256 of the canonical path.
    pub id: String,
    /// The canonical project path.
    pub path: PathBuf,
    /// The memory dir, and the rule that chose it.
    pub memory: ResolvedMemoryDir,
    /// Where the memories live when not in the memory dir, as answers name it: the
    /// [`ProjectStores`]' kind (`postgres`), or with [`McpConfig::reveal_store`] its
    /// description; `None` for the memory dir.
    pub store: Option<String>,
    /// The key its memory is stored under, and which paths map to it: what authorization is
    /// decided on, and what the store opens.
    pub key: MemoryKey,
    /// The owner its memory dir must record ([`OWNER_FILE`](crate::OWNER_FILE)): the
    /// project's tree or dir, for a per-project memory dir; `None` for a dir every project
    /// shares and for a shared store. Checked when the dir is opened, claimed at the first write.
    pub(crate) owner: Option<PathBuf>,
    /// The request's access: whether it may claim or read a memory dir that records no owner
    /// but holds memories, and what it may be told when it is refused.
    pub(crate) access: Access,
    /// Answers may name the memory dir and the store's description
    /// ([`McpConfig::reveal_store`]).
    pub(crate) reveal: bool,
}

impl Project {
    /// Whether the project has memory yet: its memory dir exists, or its memories live in a
    /// shared store (which always has the project, possibly empty).
    pub fn known(&self) -> bool {
        self.store.is_some() || self.memory.dir.is_dir()
    }
}

/// The project id: first 12 hex characters of SHA-256 of `canonical`.
///
/// ```
/// let id = memloop_mcp::project_id(std::path::Path::new("/work/app"));
/// assert_eq!(id.len(), 12);
/// assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
/// ```
pub fn project_id(canonical: &Path) -> String {
    let digest = Sha256::digest(canonical.to_string_lossy().as_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// `raw` as an absolute, existing directory's canonical path.
fn canonical_project_path(raw: &str) -> Result<PathBuf, ProjectRefused> {
    let refuse = |why: String| Err(ProjectRefused(why));
    if raw.trim().is_empty() {
        return refuse("project_path is empty".into());
    }
    if raw.contains('\0') {
        return refuse("project_path contains a NUL character".into());
    }
    let path = Path::new(raw);
    if !path.is_absolute() {
        return refuse(format!("`{raw}` is not an absolute path"));
    }
    match std::fs::canonicalize(path) {
        Ok(p) if p.is_dir() => Ok(p),
        Ok(_) => refuse(format!("`{raw}` is not a directory")),
        Err(e) => refuse(format!("`{raw}` cannot be opened: {e}")),
    }
}

/// The key of a project's memory dir, and the owner the dir must record (`None` for a dir every
/// project shares).
///
/// - A dir every project shares (`--memory-dir`, `MEMLOOP_MEMORY_DIR`, user or managed
///   settings) is reached by [`Reach::Anyone`].
/// - A per-project dir (the default, named by the slug of the project's canonical root, or one
///   named by the project's local settings) belongs to its recorded owner: the owner's tree (a
///   git root: every subdirectory maps to it) or dir. Another project whose path maps to the
///   same dir is refused. A dir that records no owner yet is claimed by the first write
///   ([`claim_owner`]); one that already holds memories (written before owners were recorded,
///   or by the CLI) may be any path's of that slug, so it is [`Reach::Anyone`]'s until a token
///   for every project writes there and records its owner.
///
/// This reads the record as it is now, for this request; [`Projects::open_read`] and
/// [`Projects::open_write`] check it again when the dir is opened (a write claims it), so what
/// was decided here is never trusted across a claim made since.
fn dir_key(
    canonical: &Path,
    memory: &ResolvedMemoryDir,
) -> Result<(MemoryKey, Option<PathBuf>), ProjectRefused> {
    let id = memory.dir.to_string_lossy().into_owned();
    let owner = match memory.rule {
        ResolutionRule::Default => canonical_project_root(canonical),
        ResolutionRule::LocalSettings => canonical.to_path_buf(),
        ResolutionRule::Override
        | ResolutionRule::EnvVar
        | ResolutionRule::UserSettings
        | ResolutionRule::ManagedSettings => {
            let reach = Reach::Anyone;
            return Ok((MemoryKey { id, reach }, None));
        }
    };
    // The owner is the path itself outside git; a different owner is a git root (or a
    // worktree's main checkout), and an equal one is a git root when it holds `.git`. (One walk
    // up the ancestors, `canonical_project_root`'s, not a second.)
    let in_git = memory.rule == ResolutionRule::Default
        && (owner != canonical || std::fs::symlink_metadata(owner.join(".git")).is_ok());
    let reach = if in_git {
        Reach::Tree(owner.clone())
    } else {
        Reach::Dir(owner.clone())
    };
    match check_owner(&memory.dir, &owner) {
        Ok(true) => Ok((MemoryKey { id, reach }, Some(owner))),
        Err(taken) => {
            taken.log(canonical);
            Err(ProjectRefused(taken.to_string()))
        }
        Ok(false) if holds_nothing(&memory.dir) => Ok((MemoryKey { id, reach }, Some(owner))),
        Ok(false) => {
            let reach = Reach::Anyone;
            Ok((MemoryKey { id, reach }, Some(owner)))
        }
    }
}

/// How [`Projects::open_read`] and [`Projects::open_write`] fail: the request is not served
/// (the memory dir is another project's), or the store failed.
#[derive(Debug)]
pub(crate) enum OpenFailed {
    /// Refused, as [`Projects::resolve`] refuses.
    NotServed(NotServed),
    /// The store could not be opened.
    Store(MemoryError),
}

impl From<MemoryError> for OpenFailed {
    fn from(e: MemoryError) -> Self {
        Self::Store(e)
    }
}

/// The refusal for `project` when its memory dir cannot be its own (`e`): the reason to a
/// request that may know the project's path (its text names no dir and no other project),
/// [`Denied::outside`] to one that may not. The log has the rest.
fn owner_refusal(project: &Project, e: &OwnerError) -> OpenFailed {
    e.log(&project.path);
    OpenFailed::NotServed(if project.access.may_know(&project.path) {
        NotServed::Refused(ProjectRefused(e.to_string()))
    } else {
        NotServed::Denied(Denied::outside())
    })
}

/// Why a request names a project the server does not serve to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotServed {
    /// The path is not a project this server serves (to anyone).
    Refused(ProjectRefused),
    /// The request's [`Access`] does not reach it.
    Denied(Denied),
}

/// Most projects `resources/list` names, and most projects the server remembers having
/// resolved (for that list; the most recently resolved kept): a replica serving any number of
/// projects keeps at most this many records (about 1 KiB each).
const MAX_LISTED: usize = 1000;

/// An open project: its store and the BM25 selector kept in step with it.
pub(crate) struct OpenProject {
    pub(crate) store: Arc<dyn MemoryStore>,
    /// The store's headers, kept current through its change feed (searches do not rescan).
    pub(crate) headers: Arc<ScanCache>,
    /// BM25, fused with embeddings when the server has an embedder (one set of BM25 postings either way).
    pub(crate) recall: DefaultSelector,
    /// The store's transactions, when it has them.
    pub(crate) batches: Option<Arc<dyn AtomicBatches>>,
    /// The list items made for its last pages.
    pub(crate) list_items: crate::pages::ListItems,
}

impl OpenProject {
    /// An estimate of the memory its caches hold, in bytes (header cache, postings, vectors);
    /// `None` while a request holds one of them.
    fn approx_bytes(&self) -> Option<usize> {
        Some(
            memloop_store::heap::arc::<Self>()
                + self.recall.approx_bytes()?
                + self.list_items.approx_bytes()?,
        )
    }
}

/// What the cache of open projects is keyed by: a memory dir, or a project path in the shared
/// stores.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CacheKey {
    Dir(PathBuf),
    Shared(PathBuf),
}

/// One open project in the cache.
struct Cached {
    open: Arc<OpenProject>,
    /// When it was last used (the cache's clock; its key in [`OpenCache::order`]).
    used: u64,
    /// Its caches' size at the last estimate.
    bytes: usize,
}

/// The open projects, under a memory budget: when their caches' estimated size passes it, the
/// least recently used projects are dropped whole (a request using one keeps its `Arc` until it
/// ends); a project needed again is opened afresh and its caches rebuilt from its store.
///
/// A project's caches grow while a request uses it, after it was taken from here, so the
/// estimates are taken at the next use of the cache: of the projects used since their last
/// estimate (estimating every project on every request would cost a walk of every cache).
///
/// The bound: after every lookup the estimated total of the projects kept is at most the
/// budget, or only the project just asked for is kept (one project larger than the budget is
/// still served; it is dropped as soon as another is asked for). What a replica holds beyond
/// the budget is what the requests in flight hold: the growth of their projects since the last
/// estimate (a write's new memories, a project's first search building its postings), and
/// projects dropped while a request still used them (freed when it ends). So memory is bounded
/// by the budget plus, per request in flight, one project's caches.
struct OpenCache {
    budget: usize,
    clock: u64,
    entries: HashMap<CacheKey, Cached>,
    /// The keys of `entries` by last use, least recent first.
    order: BTreeMap<u64, CacheKey>,
    /// The sum of the entries' estimates, in bytes.
    total: usize,
    /// Used since their last estimate (or busy at it).
    recent: HashSet<CacheKey>,
    /// What the metrics read of it, updated at each settle.
    gauges: Arc<crate::metrics::CacheGauges>,
}

impl OpenCache {
    fn new(budget: usize) -> Self {
        Self {
            budget,
            clock: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            total: 0,
            recent: HashSet::new(),
            gauges: Arc::new(crate::metrics::CacheGauges::new(budget)),
        }
    }

    /// Mark `key` used now.
    fn touch(&mut self, key: &CacheKey) {
        let Some(c) = self.entries.get_mut(key) else {
            return;
        };
        self.clock += 1;
        self.order.remove(&c.used);
        c.used = self.clock;
        self.order.insert(self.clock, key.clone());
        self.recent.insert(key.clone());
    }

    /// The project at `key`, marked used now.
    fn get(&mut self, key: &CacheKey) -> Option<Arc<OpenProject>> {
        let open = self.entries.get(key)?.open.clone();
        self.touch(key);
        self.settle(Some(key));
        Some(open)
    }

    /// Keep `open` at `key`, used now.
    fn insert(&mut self, key: CacheKey, open: Arc<OpenProject>) {
        self.remove(&key);
        let bytes = open.approx_bytes().unwrap_or(0);
        self.total += bytes;
        self.entries.insert(
            key.clone(),
            Cached {
                open,
                used: 0,
                bytes,
            },
        );
        self.order.insert(0, key.clone());
        self.touch(&key);
        self.settle(Some(&key));
    }

    /// Forget the project at `key` (its `Arc` lives on in the requests using it).
    fn remove(&mut self, key: &CacheKey) -> Option<Cached> {
        let c = self.entries.remove(key)?;
        self.order.remove(&c.used);
        self.total = self.total.saturating_sub(c.bytes);
        self.recent.remove(key);
        Some(c)
    }

    /// Estimate the projects used since their last estimate (one a request holds keeps its
    /// last estimate and is estimated again next time), then drop the least recently used
    /// ones, never `keep`, while the total is over the budget.
    fn settle(&mut self, keep: Option<&CacheKey>) {
        let mut busy = HashSet::new();
        for key in std::mem::take(&mut self.recent) {
            let Some(c) = self.entries.get_mut(&key) else {
                continue;
            };
            match c.open.approx_bytes() {
                Some(b) => {
                    self.total = self.total.saturating_sub(c.bytes) + b;
                    c.bytes = b;
                }
                None => {
                    busy.insert(key);
                }
            }
        }
        self.recent = busy;
        // The key asked for stays recent: its caches grow in the request that asked.
        if let Some(keep) = keep {
            self.recent.insert(keep.clone());
        }
        while self.total > self.budget {
            let Some((_, oldest)) = self.order.first_key_value() else {
                break;
            };
            // `keep` was used last: everything else is gone.
            if Some(oldest) == keep {
                break;
            }
            let oldest = oldest.clone();
            if let Some(c) = self.remove(&oldest) {
                self.gauges.evicted();
                tracing::debug!(project = ?oldest, bytes = c.bytes, "project cache evicted");
            }
        }
        self.gauges.held(self.total, self.entries.len());
    }
}

/// The server's projects: validation, resolution and the open stores (one per memory dir, so
/// the BM25 postings are built once and updated incrementally), under the memory budget.
pub(crate) struct Projects {
    config: McpConfig,
    roots: Vec<PathBuf>,
    /// The open projects: memory dirs, and projects open in the shared stores.
    open: Mutex<OpenCache>,
    /// The canonical paths of the projects resolved most recently, by id (at most
    /// [`MAX_LISTED`]): only paths, resolved again for each listing, so a listing decides on the
    /// memory dirs' owners as they are then.
    seen: Mutex<Bounded<String, PathBuf>>,
    /// The background summariser, when summaries are on.
    summariser: Option<crate::summaries::Summariser>,
    /// The open projects' cache, as the metrics read it.
    cache_gauges: Arc<crate::metrics::CacheGauges>,
}

impl Projects {
    pub(crate) fn new(config: McpConfig) -> Self {
        let roots = config
            .roots
            .iter()
            .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone()))
            .collect();
        let summariser = crate::summaries::Summariser::start(&config.summaries);
        let open = OpenCache::new(config.cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES));
        Self {
            cache_gauges: open.gauges.clone(),
            open: Mutex::new(open),
            config,
            roots,
            seen: Mutex::new(Bounded::new(MAX_LISTED)),
            summariser,
        }
    }

    /// The background summariser, when summaries are on.
    pub(crate) fn summariser(&self) -> Option<&crate::summaries::Summariser> {
        self.summariser.as_ref()
    }

    /// Open every project under the roots and the global memory, so the summariser resumes
    /// their pending summaries (a store resumes when it is first opened). Nothing is created.
    /// The caller holds a [`scanning`](crate::summaries::Summariser::scanning) guard meanwhile.
    pub(crate) async fn resume_pending(&self) {
        if self.summariser.is_none() {
            return;
        }
        for p in self.listed(&Access::full()).await {
            if let Err(e) = self.open_read(&p).await {
                tracing::debug!(error = ?e, project = %p.path.display(), "not resumed");
            }
        }
        if let Err(e) = self.open_global(false).await {
            tracing::debug!(error = %e, "global memory not resumed");
        }
    }

    /// Whether `init_project` may write the usage block into `CLAUDE.md`.
    pub(crate) fn claude_md(&self) -> bool {
        !self.config.no_claude_md
    }

    /// Whether searches rank with the hybrid selector.
    pub(crate) fn has_embedder(&self) -> bool {
        self.config.embedder.is_some()
    }

    /// The size caps.
    pub(crate) fn limits(&self) -> crate::answer::McpLimits {
        self.config.limits
    }

    /// How the server was started.
    /// The project cache's size, budget and evictions, as of its last settle (no lock).
    pub(crate) fn cache_use(&self) -> crate::metrics::CacheUse {
        self.cache_gauges.read()
    }

    /// The server's configuration.
    pub(crate) fn config(&self) -> &McpConfig {
        &self.config
    }

    /// The canonical roots.
    pub(crate) fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Validate `raw`, resolve the key its memory is stored under, and decide whether `access`
    /// may do `effect` there: the one function mapping a request to its memory, for
    /// authorization and storage alike. Authorization is decided on the key
    /// ([`Access::permit`]): a grant covers it only when every path that maps to it lies inside
    /// the grant. Whatever a limited token is refused, it gets [`Denied::outside`]: it learns
    /// nothing about paths outside its grant (whether they exist, where links lead, who owns a
    /// memory dir).
    ///
    /// Each resolution is an internal span `resolve_project`, with `error.type` (`refused` or
    /// `denied`) when the request is not served; never the path.
    pub(crate) async fn resolve(
        &self,
        raw: &str,
        access: &Access,
        effect: Effect,
    ) -> Result<Project, NotServed> {
        let span = tracing::info_span!(
            "resolve_project",
            otel.kind = "internal",
            otel.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let resolved = tracing::Instrument::instrument(
            self.resolve_untraced(raw, access, effect),
            span.clone(),
        )
        .await;
        if let Err(e) = &resolved {
            let kind = match e {
                NotServed::Refused(_) => "refused",
                NotServed::Denied(_) => "denied",
            };
            span.record("error.type", kind);
            span.record("otel.status_code", "ERROR");
        }
        resolved
    }

    /// [`Self::resolve`] without its span.
    async fn resolve_untraced(
        &self,
        raw: &str,
        access: &Access,
        effect: Effect,
    ) -> Result<Project, NotServed> {
        let canonical = match canonical_project_path(raw) {
            Ok(c) => c,
            Err(refused) => {
                return Err(match access.unresolvable(effect) {
                    Some(denied) => NotServed::Denied(denied),
                    None => NotServed::Refused(refused),
                });
            }
        };
        access.permit_effect(effect).map_err(NotServed::Denied)?;
        let may_know = access.may_know(&canonical);
        if matches!(access.grant(), Grant::Paths(_)) && !may_know {
            return Err(NotServed::Denied(Denied::outside()));
        }
        let refuse = |why: ProjectRefused| {
            if may_know {
                NotServed::Refused(why)
            } else {
                tracing::debug!(reason = %why, "project refused to a limited token");
                NotServed::Denied(Denied::outside())
            }
        };
        if !self.config.allow_any_project && !self.roots.iter().any(|r| canonical.starts_with(r)) {
            // The served directories are the server's to know (unless it reveals its store).
            let roots = if self.config.reveal_store {
                let roots: Vec<String> =
                    self.roots.iter().map(|r| r.display().to_string()).collect();
                format!(" ({})", roots.join(", "))
            } else {
                String::new()
            };
            return Err(refuse(ProjectRefused(format!(
                "`{raw}` is outside the directories this server was started for{roots}; start it \
                 with `--root` or `--allow-any-project` to serve it",
            ))));
        }
        let project = self.project_at(canonical, access).map_err(refuse)?;
        access
            .permit(&project.key, effect)
            .map_err(NotServed::Denied)?;
        self.seen
            .lock()
            .await
            .insert(project.id.clone(), project.path.clone());
        Ok(project)
    }

    /// Before a write to `project` that `access` was permitted: let the shared store take over
    /// the project's legacy memories when `access` covers every project. (A memory dir's owner
    /// is claimed where the dir is opened for the write, [`Self::open_write`].)
    pub(crate) async fn before_write(&self, project: &Project, access: &Access) {
        if let Some(stores) = &self.config.stores
            && !access.is_limited()
            && let Err(e) = stores.claim_legacy(project).await
        {
            tracing::warn!(project = %project.path.display(), error = %e, "legacy memories not claimed");
        }
    }

    /// The project at `canonical` as `access` sees it now (its key from the memory dir's owner
    /// record as it is now).
    fn project_at(&self, canonical: PathBuf, access: &Access) -> Result<Project, ProjectRefused> {
        let base = if self.config.claude {
            MemoryDirResolver::claude_code(&canonical)
        } else {
            MemoryDirResolver::new(&canonical)
        };
        let base = base.env(self.config.env.clone());
        let resolver = match &self.config.memory_dir {
            Some(dir) => base.override_dir(dir),
            None => base,
        };
        // Why resolution failed may name server paths (the memory dir): the log has them, the
        // client only when the server reveals its store.
        let reveal = self.config.reveal_store;
        let failed = |what: &str, e: &MemoryError| {
            tracing::warn!(project = %canonical.display(), error = %e, "cannot resolve its {what}");
            ProjectRefused(if reveal {
                format!("cannot resolve its {what}: {e}")
            } else {
                format!(
                    "cannot resolve its {what}: {}",
                    crate::disclosure::client_text(e)
                )
            })
        };
        let memory = resolver
            .resolve()
            .map_err(|e| failed("memory directory", &e))?;
        let (key, owner) = match &self.config.stores {
            Some(stores) => (
                stores
                    .key(&canonical)
                    .map_err(|e| failed("team project", &e))?,
                None,
            ),
            None => dir_key(&canonical, &memory)?,
        };
        Ok(Project {
            id: project_id(&canonical),
            path: canonical,
            memory,
            store: self.config.stores.as_ref().map(|s| {
                if self.config.reveal_store {
                    s.describe()
                } else {
                    s.kind().to_owned()
                }
            }),
            key,
            owner,
            access: access.clone(),
            reveal: self.config.reveal_store,
        })
    }

    /// The projects a client with `access` may know about: each root and each directory
    /// directly under a root (hidden ones skipped, at most [`MAX_LISTED`] in all), then every
    /// project resolved recently. Each is resolved now (its key from its memory dir's owner
    /// record as it is now, never as it was when the project was first seen). Only the validated
    /// projects; whether they have memory and whether `access` reaches them is the caller's
    /// question.
    pub(crate) async fn listed(&self, access: &Access) -> Vec<Project> {
        let mut out: Vec<Project> = Vec::new();
        let push = |p: Project, out: &mut Vec<Project>| {
            if out.len() < MAX_LISTED && !out.iter().any(|o| o.id == p.id) {
                out.push(p);
            }
        };
        for root in &self.roots {
            let mut candidates = vec![root.clone()];
            if let Ok(entries) = std::fs::read_dir(root) {
                let mut children: Vec<PathBuf> = entries
                    .flatten()
                    .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                    .filter_map(|e| std::fs::canonicalize(e.path()).ok())
                    .filter(|p| p.is_dir() && p.starts_with(root))
                    .collect();
                children.sort();
                candidates.extend(children);
            }
            for c in candidates {
                match self.project_at(c, access) {
                    Ok(p) => push(p, &mut out),
                    Err(e) => tracing::debug!(error = %e, "project not listed"),
                }
            }
        }
        let seen: Vec<PathBuf> = self.seen.lock().await.newest_first().cloned().collect();
        for path in seen {
            if out.len() >= MAX_LISTED {
                break;
            }
            if out.iter().any(|o| o.path == path) {
                continue;
            }
            match self.project_at(path, access) {
                Ok(p) => push(p, &mut out),
                Err(e) => tracing::debug!(error = %e, "project not listed"),
            }
        }
        out
    }

    /// Open `project`'s store to read it; `Ok(None)` when it has no memory dir. A memory dir
    /// whose owner record names another project is refused, as [`Self::resolve`] refuses it,
    /// whatever was decided when the request was resolved; one that records no owner is read
    /// only by a request whose access covers every project (for any other it holds nothing
    /// yet: its first write claims it). The record is written once, so what is read after
    /// this check is the owner's.
    pub(crate) async fn open_read(
        &self,
        project: &Project,
    ) -> Result<Option<Arc<OpenProject>>, OpenFailed> {
        let Some(stores) = &self.config.stores else {
            if let Some(owner) = &project.owner {
                match check_owner(&project.memory.dir, owner) {
                    Ok(true) => {}
                    Err(taken) => return Err(owner_refusal(project, &taken)),
                    Ok(false) if project.access.is_limited() => return Ok(None),
                    Ok(false) => {}
                }
            }
            return Ok(self.open_dir(&project.memory.dir, false).await?);
        };
        Ok(Some(self.open_shared(stores.as_ref(), project).await?))
    }

    /// Open `project`'s store to write it (creating the memory dir when `create`; `Ok(None)`
    /// when it has none and `create` is false). A per-project memory dir is claimed first
    /// ([`claim_owner`], atomic across processes): the owner is decided before any byte of the
    /// write lands, and a dir another project claimed, even after this request was resolved,
    /// is refused. Every write path opens its store here.
    pub(crate) async fn open_write(
        &self,
        project: &Project,
        create: bool,
    ) -> Result<Option<Arc<OpenProject>>, OpenFailed> {
        let Some(stores) = &self.config.stores else {
            let dir = &project.memory.dir;
            if let Some(owner) = &project.owner {
                if !create && !dir.is_dir() {
                    return Ok(None);
                }
                self.claim(project, owner).await?;
            }
            return Ok(self.open_dir(dir, create).await?);
        };
        Ok(Some(self.open_shared(stores.as_ref(), project).await?))
    }

    /// Claim `project`'s memory dir for `owner`, off the runtime's threads.
    async fn claim(&self, project: &Project, owner: &Path) -> Result<(), OpenFailed> {
        let (dir, owner) = (project.memory.dir.clone(), owner.to_path_buf());
        let adopt = !project.access.is_limited();
        let shown = dir.display().to_string();
        tokio::task::spawn_blocking(move || claim_owner(&dir, &owner, adopt))
            .await
            .unwrap_or_else(|e| {
                Err(OwnerError::Io {
                    dir: shown,
                    why: e.to_string(),
                })
            })
            .map_err(|e| owner_refusal(project, &e))
    }

    /// Open `project`'s store in the shared stores (once; kept open, keyed by the project path).
    async fn open_shared(
        &self,
        stores: &dyn ProjectStores,
        project: &Project,
    ) -> Result<Arc<OpenProject>, MemoryError> {
        let key = CacheKey::Shared(project.path.clone());
        let mut open = self.open.lock().await;
        if let Some(p) = open.get(&key) {
            return Ok(p);
        }
        let limits = self.config.limits.write_limits();
        let opened = stores.open_store(project, limits).await?;
        if opened.store.write_limits() != limits {
            tracing::warn!(
                project = %project.path.display(),
                "the store was opened with other write limits than the server's"
            );
        }
        let opened = self.wrap(opened);
        open.insert(key, opened.clone());
        Ok(opened)
    }

    /// A freshly opened store with its header cache and selectors.
    fn wrap(&self, opened: OpenedStore) -> Arc<OpenProject> {
        let OpenedStore { store, batches } = opened;
        // Every store call a tool makes is a span (crate::store_spans), whichever backend.
        let store: Arc<dyn MemoryStore> = Arc::new(crate::store_spans::TracedStore(store));
        let batches = batches
            .map(|b| Arc::new(crate::store_spans::TracedBatches(b)) as Arc<dyn AtomicBatches>);
        let recall = DefaultSelector::new(store.clone(), self.config.embedder.clone());
        if let Some(s) = &self.summariser {
            s.resume(&store);
        }
        Arc::new(OpenProject {
            headers: recall.header_cache(),
            store,
            recall,
            batches,
            list_items: crate::pages::ListItems::default(),
        })
    }

    /// The global memory dir shared by every project: `<base>/global/memory` (`MEMLOOP_HOME`
    /// or `~/.memloop`; with `--claude`, `CLAUDE_CONFIG_DIR` or `~/.claude`). `None` when there
    /// is no base (no home directory).
    pub(crate) fn global_dir(&self) -> Option<PathBuf> {
        let resolver = if self.config.claude {
            MemoryDirResolver::claude_code("/")
        } else {
            MemoryDirResolver::new("/")
        };
        resolver
            .env(self.config.env.clone())
            .base_dir()
            .ok()
            .map(|b| b.join("global").join("memory"))
    }

    /// Open the global memory (creating it when `create`); `Ok(None)` when it does not exist
    /// (or there is no base dir).
    pub(crate) async fn open_global(
        &self,
        create: bool,
    ) -> Result<Option<Arc<OpenProject>>, MemoryError> {
        match self.global_dir() {
            Some(dir) => self.open_dir(&dir, create).await,
            None => Ok(None),
        }
    }

    async fn open_dir(
        &self,
        dir: &Path,
        create: bool,
    ) -> Result<Option<Arc<OpenProject>>, MemoryError> {
        let key = CacheKey::Dir(dir.to_path_buf());
        let mut open = self.open.lock().await;
        let exists = dir.is_dir();
        if exists {
            if let Some(p) = open.get(&key) {
                return Ok(Some(p));
            }
        } else {
            open.remove(&key);
        }
        if !create && !exists {
            return Ok(None);
        }
        let config = StoreConfig {
            write: self.config.limits.write_limits(),
            ..StoreConfig::default()
        };
        let store = FileMemoryStore::open(dir)?.with_config(config);
        let opened = self.wrap(OpenedStore::plain(Arc::new(store)));
        open.insert(key, opened.clone());
        Ok(Some(opened))
    }

    /// Estimate the caches of the projects used since the last estimate, evict past the
    /// budget, and return the estimated total and how many projects stay open.
    #[cfg(test)]
    async fn cache_usage(&self) -> (usize, usize) {
        let mut open = self.open.lock().await;
        // Nothing is kept out of the eviction: no request is using a project now.
        open.settle(None);
        let summed: usize = open.entries.values().map(|c| c.bytes).sum();
        assert_eq!(open.total, summed, "the running total drifted");
        assert_eq!(open.order.len(), open.entries.len());
        (open.total, open.entries.len())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[cfg_attr(not(unix), allow(dead_code))] // its one user makes symlinks
    fn config(root: &Path, home: &Path, allow_any: bool) -> McpConfig {
        McpConfig {
            roots: vec![root.to_path_buf()],
            allow_any_project: allow_any,
            env: EnvVars::from_pairs([("MEMLOOP_HOME", home.to_string_lossy().into_owned())]),
            claude: false,
            memory_dir: None,
            limits: Default::default(),
            no_claude_md: false,
            embedder: None,
            summaries: Default::default(),
            stores: None,
            cache_bytes: None,
            reveal_store: false,
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn project_paths_are_validated_against_the_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (root, home, outside) = (base.join("root"), base.join("home"), base.join("outside"));
        for d in [&root.join("app"), &home, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let projects = Projects::new(config(&root, &home, false));
        let full = Access::full();
        let ok = projects
            .resolve(&root.join("app").to_string_lossy(), &full, Effect::Write)
            .await
            .unwrap();
        assert_eq!(ok.id, project_id(&root.join("app")));
        assert!(ok.memory.dir.starts_with(&home) && !ok.known());
        for bad in [
            outside.to_string_lossy().into_owned(),
            root.join("link").to_string_lossy().into_owned(),
            root.join("app/../../outside")
                .to_string_lossy()
                .into_owned(),
            "relative/path".into(),
            root.join("missing").to_string_lossy().into_owned(),
            String::new(),
            "/tmp/a\0b".into(),
        ] {
            assert!(
                projects.resolve(&bad, &full, Effect::Read).await.is_err(),
                "{bad:?} accepted"
            );
        }
        let any = Projects::new(config(&root, &home, true));
        assert!(
            any.resolve(&outside.to_string_lossy(), &full, Effect::Read)
                .await
                .is_ok()
        );
    }

    /// `n` memories about `topic` in `project` (opened, its memory dir created).
    async fn fill(projects: &Projects, project: &Project, topic: &str, n: usize) {
        use memloop_store::{MemoryDoc, MemoryType, WriteMode};
        let open = projects.open_write(project, true).await.unwrap().unwrap();
        for i in 0..n {
            let doc = MemoryDoc::new(
                format!("{topic} note {i}"),
                format!("what we learned about {topic} ({i})"),
                MemoryType::Project,
                format!("The {topic} service {i} restarts nightly; its queue drains in order.\n"),
            );
            open.store
                .write(&format!("{topic}_{i}.md"), &doc, WriteMode::Overwrite)
                .await
                .unwrap();
        }
    }

    /// Search `project` as `context_search` does (through its open caches): the paths found.
    async fn search(projects: &Projects, project: &Project, query: &str) -> Vec<String> {
        let open = projects.open_read(project).await.unwrap().unwrap();
        let headers = open.headers.headers().await.unwrap();
        open.recall
            .bm25()
            .scored(query, &headers, 5, |_| true)
            .await
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    /// The project `root/name`, resolved for a write.
    async fn at(projects: &Projects, root: &Path, name: &str) -> Project {
        let path = root.join(name).to_string_lossy().into_owned();
        projects
            .resolve(&path, &Access::full(), Effect::Write)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e:?}"))
    }

    fn budgeted(root: &Path, home: &Path, bytes: Option<usize>) -> Projects {
        Projects::new(McpConfig {
            cache_bytes: bytes,
            ..config(root, home, false)
        })
    }

    #[tokio::test]
    async fn the_projects_remembered_are_the_latest_few() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (root, home) = (base.join("root"), base.join("home"));
        let names: Vec<String> = (0..MAX_LISTED + 20).map(|i| format!("p{i:04}")).collect();
        for name in &names {
            std::fs::create_dir_all(root.join(name)).unwrap();
        }
        std::fs::create_dir_all(&home).unwrap();
        let projects = Projects::new(config(&root, &home, false));
        let mut resolved = Vec::new();
        for name in &names {
            let path = root.join(name).to_string_lossy().into_owned();
            let p = projects
                .resolve(&path, &Access::full(), Effect::Read)
                .await
                .unwrap();
            resolved.push(p.id);
        }
        let seen = projects.seen.lock().await;
        assert_eq!(seen.len(), MAX_LISTED, "one record per project ever served");
        assert!(seen.contains(resolved.last().unwrap()));
        assert!(!seen.contains(&resolved[0]), "the oldest is forgotten");
    }

    #[tokio::test]
    async fn project_caches_stay_under_the_budget_least_recently_used_first() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (root, home) = (base.join("root"), base.join("home"));
        for d in ["a", "b", "c", "d"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::create_dir_all(&home).unwrap();

        // One project's caches, searched once, with the default budget: kept.
        let unbounded = budgeted(&root, &home, None);
        let d = at(&unbounded, &root, "d").await;
        fill(&unbounded, &d, "billing", 20).await;
        assert_eq!(search(&unbounded, &d, "billing queue").await.len(), 5);
        let (one, open) = unbounded.cache_usage().await;
        assert_eq!(open, 1);
        // The estimate grows with content: 60 more memories, a larger cache.
        fill(&unbounded, &d, "payments", 60).await;
        assert_eq!(search(&unbounded, &d, "payments queue").await.len(), 5);
        let (more, _) = unbounded.cache_usage().await;
        assert!(
            more > one * 2,
            "estimate {one} -> {more} for 4x the memories"
        );

        // Room for two such projects, not three: touching a, b, c drops a.
        let budget = one * 5 / 2;
        let projects = budgeted(&root, &home, Some(budget));
        let (a, b, c) = (
            at(&projects, &root, "a").await,
            at(&projects, &root, "b").await,
            at(&projects, &root, "c").await,
        );
        for p in [&a, &b, &c] {
            fill(&projects, p, "billing", 20).await;
        }
        for p in [&a, &b, &c] {
            assert!(!search(&projects, p, "billing queue").await.is_empty());
        }
        let (total, open) = projects.cache_usage().await;
        assert!(total <= budget, "{total} bytes kept, budget {budget}");
        assert_eq!(open, 2, "a, least recently used, is evicted");
        {
            let cache = projects.open.lock().await;
            assert!(
                !cache
                    .entries
                    .contains_key(&CacheKey::Dir(a.memory.dir.clone()))
            );
            assert!(
                cache
                    .entries
                    .contains_key(&CacheKey::Dir(c.memory.dir.clone()))
            );
        }
        // An evicted project is opened afresh: its search still finds its memories.
        let found = search(&projects, &a, "billing queue").await;
        assert_eq!(found.len(), 5, "{found:?}");
        let (total, _) = projects.cache_usage().await;
        assert!(total <= budget, "{total} bytes kept, budget {budget}");
    }

    /// A token limited to exactly `path`.
    fn limited_to(path: &Path) -> Access {
        use crate::access::{ProjectGlob, TokenScope};
        let glob = ProjectGlob::new(&path.to_string_lossy()).unwrap();
        Access::new(Grant::Paths(glob), TokenScope::Write)
    }

    /// The names of the memories in `dir` (its visible files, recursively).
    fn memories_in(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in walkdir(dir) {
            let name = e.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if !name.split('/').any(|part| part.starts_with('.')) {
                out.push(name);
            }
        }
        out.sort();
        out
    }

    fn walkdir(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = e.path();
            if e.file_type().unwrap().is_dir() {
                out.extend(walkdir(&path));
            } else {
                out.push(path);
            }
        }
        out
    }

    #[tokio::test]
    async fn a_memory_dir_claimed_after_a_request_was_resolved_is_neither_written_nor_read_by_it() {
        use crate::mapping::{EntryType, Scope};
        use crate::ops::{ManageAction, ManageRequest, SaveEntry};
        use crate::tiers::Detail;
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (root, home) = (base.join("root"), base.join("home"));
        // Two projects whose paths share one slug, each token limited to its own.
        let (a, b) = (root.join("团队/app"), root.join("团队-app"));
        for d in [&a, &b, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        let projects = Projects::new(config(&root, &home, false));
        let (access_a, access_b) = (limited_to(&a), limited_to(&b));
        let resolve = |path: &Path, access: &Access, effect: Effect| {
            let path = path.to_string_lossy().into_owned();
            let (projects, access) = (&projects, access.clone());
            async move { projects.resolve(&path, &access, effect).await.unwrap() }
        };
        // Every request of A is checked while the dir does not exist yet...
        let a_write = resolve(&a, &access_a, Effect::Write).await;
        let a_read = resolve(&a, &access_a, Effect::Read).await;
        let b_write = resolve(&b, &access_b, Effect::Write).await;
        assert_eq!(a_write.memory.dir, b_write.memory.dir, "one slug, one dir");
        assert!(!a_write.memory.dir.exists());
        // ... then B's first save lands (its claim, then its write) ...
        let entry = |content: &str| SaveEntry {
            kind: EntryType::Knowledge,
            title: Some(format!("plan {content}")),
            content: content.to_owned(),
            tags: Vec::new(),
            global: false,
            expected_version: None,
        };
        let limits = projects.limits();
        let saved = crate::save::save(
            &projects,
            b_write.clone(),
            &[entry("B's plan")],
            None,
            limits,
        )
        .await
        .unwrap();
        assert_eq!(saved["written"], 1, "{saved}");
        let dir = b_write.memory.dir.clone();
        let before = memories_in(&dir);
        assert!(!before.is_empty());
        // ... and every write A was permitted before that claim is refused: plain and keyed
        // saves, deletes, updates, init.
        let refused = |r: Result<serde_json::Value, crate::ops::Refusal>| {
            let reason = r
                .expect_err("written into another project's memory dir")
                .reason;
            assert!(reason.contains("another project"), "{reason}");
            assert!(
                !reason.contains(&*home.to_string_lossy()),
                "names the dir: {reason}"
            );
        };
        refused(
            crate::save::save(
                &projects,
                a_write.clone(),
                &[entry("A's plan")],
                None,
                limits,
            )
            .await,
        );
        let key = crate::batch::SaveKey {
            caller: "a".into(),
            key: "k-1".into(),
            request_sha256: crate::batch::sha256_hex(b"a"),
        };
        refused(
            crate::save::save(
                &projects,
                a_write.clone(),
                &[entry("A's keyed plan")],
                Some(key),
                limits,
            )
            .await,
        );
        let target = before
            .iter()
            .find(|m| m.ends_with(".md") && m.as_str() != "MEMORY.md");
        for action in [
            ManageAction::Delete,
            ManageAction::Update,
            ManageAction::InitProject,
        ] {
            let request = ManageRequest {
                action,
                target: target.map(String::as_str),
                content: Some("A rewrote it"),
                expected_version: None,
                cursor: None,
            };
            refused(
                crate::ops::manage(&projects, a_write.clone(), request, false)
                    .await
                    .map(|_| serde_json::Value::Null),
            );
        }
        // Reads A was permitted before the claim see nothing of B's.
        refused(crate::ops::load(&projects, a_read.clone(), Detail::Full).await);
        refused(
            crate::ops::search(
                &projects,
                a_read.clone(),
                "plan",
                Scope::All,
                5,
                Detail::Full,
            )
            .await,
        );
        assert_eq!(memories_in(&dir), before, "A wrote into B's memory dir");
        assert_eq!(crate::key::recorded_owner(&dir), Ok(Some(b.clone())));
        // A listing for A resolves again: B's dir is not A's project.
        let listed = projects.listed(&access_a).await;
        assert!(
            listed
                .iter()
                .all(|p| access_a.permit(&p.key, Effect::Read).is_err() || p.path == b),
            "{listed:?}"
        );
        assert!(listed.iter().all(|p| p.path != a), "{listed:?}");
        // B still reaches its memory.
        let load = crate::ops::load(
            &projects,
            resolve(&b, &access_b, Effect::Read).await,
            Detail::Full,
        )
        .await
        .unwrap();
        assert_eq!(load["known"], true, "{load}");
    }
}
