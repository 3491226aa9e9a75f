//! `memloop mcp --database-url URL` (or `MEMLOOP_DATABASE_URL`): every served project keeps its
//! memories in the PostgreSQL team store ([`memloop_mcp::TeamStores`]).

use crate::context::Context;
use anyhow::bail;
use memloop_mcp::{ProjectStores, TeamStores};
use memloop_pg::PgConfig;
use std::sync::Arc;

/// The `application_name` prefix of the server's database connections; the process id follows
/// (`memloop-mcp:4242`), so an operator can tell which server holds a connection.
pub const APPLICATION_NAME: &str = "memloop-mcp";

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
    let stores = TeamStores::new(url, ctx.env.clone())
        .application_name(format!("{APPLICATION_NAME}:{}", std::process::id()));
    Ok(Some(Arc::new(stores)))
}
