//! The PostgreSQL team store behind the tools (feature `postgres`): one [`PgMemoryStore`] per
//! served project, all on one connection pool, each under the team project id
//! [`ProjectIdentity`] gives its directory (its git `origin` URL, else `dir:` and its canonical
//! path, so two dirs of one name never share memory). The server authorizes on that id
//! ([`ProjectStores::key`]): an origin id is reached by every checkout of the origin, so only a
//! grant naming the origin (or the id) covers it; a `dir:` id only by its own directory.
//! Memories of a pre-schema-6 id (a directory's base name) are taken over only by a write of a
//! token for every project, never at open and never by a read.

use crate::bounded::Bounded;
use crate::key::{MemoryKey, Reach};
use crate::metrics::PoolUse;
use crate::projects::{
    ClaimFuture, OpenFuture, OpenStoreFuture, OpenedStore, Project, ProjectStores, ReadyFuture,
};
use memloop_host::env::EnvVars;
use memloop_pg::{PgConfig, PgMemoryStore, PgPool, ProjectIdentity};
use memloop_store::{MemoryError, MemoryStore, WriteLimits};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Connections one server holds to the database, shared by all the projects it serves (a
/// pool per project would hold 4 per project: a server with 30 projects would pass
/// PostgreSQL's default `max_connections` of 100 alone).
pub const SERVER_POOL_SIZE: usize = 8;

/// How many directories' identities, and legacy ids tried, a server remembers (the most
/// recent): its memory does not grow with the number of projects it ever served (about 0.5 KiB
/// an identity).
const REMEMBERED: usize = 4096;

/// Opens one [`PgMemoryStore`] per served project on one database, all on one connection pool.
pub struct TeamStores {
    url: String,
    shown: String,
    env: EnvVars,
    application_name: String,
    schema: Option<String>,
    /// The server's pool, made at the first open.
    pool: Mutex<Option<PgPool>>,
    /// The legacy ids this server has claimed or found claimed, the [`REMEMBERED`] latest
    /// (each is tried once while remembered; one forgotten is tried again, which finds it
    /// claimed and moves nothing).
    claimed: Mutex<Bounded<String, ()>>,
    /// Each served directory's identity, looked up once (a `git` run) while among the
    /// [`REMEMBERED`] latest: the key is computed on every request, and a directory's origin
    /// does not change under a running server.
    identities: Mutex<Bounded<PathBuf, ProjectIdentity>>,
}

impl TeamStores {
    /// The team stores at `url`; writer name and local dirs (the vector cache) from `env`.
    pub fn new(url: impl Into<String>, env: EnvVars) -> Self {
        let url = url.into();
        let shown = PgConfig::new(url.clone(), "-").redacted_url();
        Self {
            url,
            shown,
            env,
            application_name: "memloop-mcp".into(),
            schema: None,
            pool: Mutex::new(None),
            claimed: Mutex::new(Bounded::new(REMEMBERED)),
            identities: Mutex::new(Bounded::new(REMEMBERED)),
        }
    }

    /// Name the server's database connections (`application_name`; default `memloop-mcp`).
    pub fn application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = name.into();
        self
    }

    /// Keep the tables in `schema` instead of the connection's default.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// The connection settings for the team project `key` names (its id, as
    /// [`ProjectStores::key`] gave it). Legacy ids are not claimed at open
    /// ([`ProjectStores::claim_legacy`] does it, for writers of every project).
    pub fn config(&self, key: &MemoryKey) -> PgConfig {
        self.settings(key.id.clone())
    }

    /// The connection settings, under `project_id`.
    fn settings(&self, project_id: String) -> PgConfig {
        let config = PgConfig::new(self.url.clone(), project_id)
            .env(&self.env)
            .application_name(&self.application_name)
            .pool_size(SERVER_POOL_SIZE);
        match &self.schema {
            Some(schema) => config.schema(schema),
            None => config,
        }
    }

    /// The identity of the directory at `canonical` ([`ProjectIdentity::of`]), once per
    /// directory.
    fn identity(&self, canonical: &Path) -> ProjectIdentity {
        let cached = self
            .identities
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(canonical)
            .cloned();
        cached.unwrap_or_else(|| {
            let identity = ProjectIdentity::of(canonical);
            self.identities
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(canonical.to_path_buf(), identity.clone());
            identity
        })
    }

    /// Open `project`'s store on the server's pool, with the server's write limits.
    async fn open_project(
        &self,
        project: &Project,
        limits: WriteLimits,
    ) -> Result<PgMemoryStore, MemoryError> {
        let config = self.config(&project.key).write_limits(limits);
        tracing::info!(project = %project.path.display(), team_project = %config.project_id, "opening the team store");
        let pool = self.pool(&config)?;
        PgMemoryStore::open_in(config, &pool)
            .await
            .map_err(MemoryError::from)
    }

    /// The server's pool, made with `config`'s connection settings at the first use.
    fn pool(&self, config: &PgConfig) -> Result<PgPool, MemoryError> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        match &*pool {
            Some(p) => Ok(p.clone()),
            None => {
                let p = PgPool::new(config).map_err(MemoryError::from)?;
                *pool = Some(p.clone());
                Ok(p)
            }
        }
    }
}

/// How long the readiness check waits for the database's answer to `SELECT 1`.
pub const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl ProjectStores for TeamStores {
    fn describe(&self) -> String {
        format!("postgres:{}", self.shown)
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    /// `SELECT 1` through the server's pool, within [`READY_TIMEOUT`].
    fn ready(&self) -> ReadyFuture<'_> {
        Box::pin(async move {
            let pool = self.pool(&self.settings("-".into()))?;
            pool.ping(READY_TIMEOUT).await.map_err(MemoryError::from)
        })
    }

    /// The server's pool now; before its first use (made lazily), empty with its size.
    fn pool_use(&self) -> Option<PoolUse> {
        let pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        Some(match &*pool {
            Some(p) => {
                let s = p.status();
                PoolUse {
                    in_use: s.in_use as u64,
                    idle: s.idle as u64,
                    max: s.max as u64,
                    waiting: s.waiting as u64,
                }
            }
            None => PoolUse {
                max: SERVER_POOL_SIZE as u64,
                ..PoolUse::default()
            },
        })
    }

    /// The team project id ([`ProjectIdentity`]): reached by every checkout of its origin, or by
    /// its own directory alone.
    fn key(&self, canonical: &Path) -> Result<MemoryKey, MemoryError> {
        let identity = self.identity(canonical);
        let reach = match identity.origin {
            Some(origin) => Reach::Origin(origin),
            None => Reach::Dir(canonical.to_path_buf()),
        };
        Ok(MemoryKey {
            id: identity.id,
            reach,
        })
    }

    fn claim_legacy<'a>(&'a self, project: &'a Project) -> ClaimFuture<'a> {
        Box::pin(async move {
            if !matches!(project.key.reach, Reach::Dir(_)) {
                return Ok(());
            }
            let Some(legacy) = self.identity(&project.path).legacy else {
                return Ok(());
            };
            let tried = |claimed: &Mutex<Bounded<String, ()>>| {
                claimed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&legacy)
            };
            if tried(&self.claimed) {
                return Ok(());
            }
            let store = self
                .open_project(project, memloop_store::WriteLimits::default())
                .await?;
            store
                .claim_legacy(&legacy)
                .await
                .map_err(MemoryError::from)?;
            self.claimed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(legacy, ());
            Ok(())
        })
    }

    fn open<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenFuture<'a> {
        Box::pin(async move {
            let store = self.open_project(project, limits).await?;
            Ok(Arc::new(store) as Arc<dyn MemoryStore>)
        })
    }

    /// The team store with its transactions: a `context_save` batch is one transaction, and
    /// its idempotency key is recorded in it.
    fn open_store<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenStoreFuture<'a> {
        Box::pin(async move {
            let store = self.open_project(project, limits).await?;
            Ok(OpenedStore::atomic(Arc::new(store)))
        })
    }
}
