//! `memloop mcp --database-url URL` (or `MEMLOOP_DATABASE_URL`): every served project keeps its
//! memories in the PostgreSQL team store, under the same project id `memloop team` uses for
//! that project dir ([`memloop_pg::project_id_for`]: its git `origin` URL, else `dir:` and its
//! canonical path, so two dirs of one name never share memory).

use crate::context::Context;
use anyhow::bail;
use memloop_mcp::{OpenFuture, OpenStoreFuture, OpenedStore, Project, ProjectStores};
use memloop_pg::{PgConfig, PgMemoryStore, PgPool};
use memloop_store::env::EnvVars;
use memloop_store::{MemoryError, MemoryStore, WriteLimits};
use std::sync::Arc;

/// The `application_name` prefix of the server's database connections; the process id follows
/// (`memloop-mcp:4242`), so an operator can tell which server holds a connection.
pub const APPLICATION_NAME: &str = "memloop-mcp";

/// Connections one server holds to the database, shared by all the projects it serves (a
/// pool per project would hold 4 per project: a server with 30 projects would pass
/// PostgreSQL's default `max_connections` of 100 alone).
pub const SERVER_POOL_SIZE: usize = 8;

/// Opens one [`PgMemoryStore`] per served project on one database, all on one connection pool.
pub struct TeamStores {
    url: String,
    shown: String,
    env: EnvVars,
    /// The server's pool, made at the first open.
    pool: std::sync::Mutex<Option<PgPool>>,
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
            pool: std::sync::Mutex::new(None),
        }
    }

    /// The connection settings for the project at `project_dir` ([`PgConfig::for_project_dir`]).
    pub fn config(&self, project_dir: &std::path::Path) -> PgConfig {
        PgConfig::for_project_dir(self.url.clone(), project_dir)
            .env(&self.env)
            .application_name(format!("{APPLICATION_NAME}:{}", std::process::id()))
            .pool_size(SERVER_POOL_SIZE)
    }

    /// Open `project`'s store on the server's pool, with the server's write limits.
    async fn open_project(
        &self,
        project: &Project,
        limits: WriteLimits,
    ) -> Result<PgMemoryStore, MemoryError> {
        let config = self.config(&project.path).write_limits(limits);
        tracing::info!(project = %project.path.display(), team_project = %config.project_id, "opening the team store");
        let pool = {
            let mut pool = self
                .pool
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match &*pool {
                Some(p) => p.clone(),
                None => {
                    let p = PgPool::new(&config).map_err(MemoryError::from)?;
                    *pool = Some(p.clone());
                    p
                }
            }
        };
        PgMemoryStore::open_in(config, &pool)
            .await
            .map_err(MemoryError::from)
    }
}

impl ProjectStores for TeamStores {
    fn describe(&self) -> String {
        format!("postgres:{}", self.shown)
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

/// The team stores `--database-url` or `MEMLOOP_DATABASE_URL` names, if any. `--team-project`
/// names one project and the server serves many, so it is refused here.
pub fn from_context(ctx: &Context) -> anyhow::Result<Option<Arc<dyn ProjectStores>>> {
    let url = ctx
        .database_url
        .clone()
        .or_else(|| PgConfig::url_from_env(&ctx.env));
    let Some(url) = url else {
        return Ok(None);
    };
    if ctx.team_project.is_some() {
        bail!(
            "--team-project names one team project, but `memloop mcp` serves many: each \
             project's id is its git origin URL (else its canonical path), as for `memloop team`"
        );
    }
    Ok(Some(Arc::new(TeamStores::new(url, ctx.env.clone()))))
}
