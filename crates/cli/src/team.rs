//! `memloop team push|pull|status`: sync the memory dir (or a subfolder) with the team store.

use crate::args::{TeamCommand, TeamSyncArgs};
use crate::context::{Context, Io, write_json};
use crate::exit::{Exit, Failure};
use memloop_memory::store::{FileMemoryStore, validate_rel_path};
use memloop_pg::{PgConfig, SyncAction, SyncOptions, TeamSync};

/// Run a `team` subcommand.
pub async fn run(cmd: &TeamCommand, ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    let url = ctx
        .database_url
        .clone()
        .or_else(|| PgConfig::url_from_env(&ctx.env))
        .ok_or_else(|| {
            Failure::new(
                Exit::Usage,
                "no team database: pass --database-url or set MEMLOOP_DATABASE_URL",
            )
        })?;
    let (args, verb) = match cmd {
        TeamCommand::Push(a) => (a, "push"),
        TeamCommand::Pull(a) => (a, "pull"),
        TeamCommand::Status(a) => (a, "status"),
    };
    let sync = open_sync(ctx, args, &url).await?;
    let opts = SyncOptions { prune: args.prune };
    let report = match cmd {
        TeamCommand::Push(_) => sync.push(opts).await?,
        TeamCommand::Pull(_) => sync.pull(opts).await?,
        TeamCommand::Status(_) => sync.status().await?,
    };
    if ctx.json {
        return write_json(io.out, &report);
    }
    if report.items.is_empty() {
        writeln!(io.out, "team memory {verb}: everything in sync")?;
        return Ok(());
    }
    for item in &report.items {
        let state = serde_json::to_value(item.state)?;
        let what = match &item.action {
            SyncAction::None => String::new(),
            SyncAction::Pushed { version } => format!("pushed (v{version})"),
            SyncAction::Pulled { version } => format!("pulled (v{version})"),
            SyncAction::DeletedRemote => "deleted on the server".into(),
            SyncAction::DeletedLocal => "deleted locally".into(),
            SyncAction::DeletionSkipped => "deletion not propagated (use --prune)".into(),
            SyncAction::Conflict { recovery, reason } => match recovery {
                Some(p) => format!("CONFLICT: {reason} ({})", p.display()),
                None => format!("CONFLICT: {reason}"),
            },
            SyncAction::SecretRefused { pattern } => {
                format!("refused: looks like a secret ({pattern}); it stays on this machine")
            }
            SyncAction::Failed { error } => format!("FAILED: {error}"),
        };
        writeln!(
            io.out,
            "{:<17} {}  {what}",
            state.as_str().unwrap_or_default(),
            item.rel_path
        )?;
    }
    if report.conflicts() > 0 {
        writeln!(io.err, "{} conflict(s)", report.conflicts())?;
    }
    Ok(())
}

async fn open_sync(ctx: &Context, args: &TeamSyncArgs, url: &str) -> anyhow::Result<TeamSync> {
    let resolved = ctx.resolve()?;
    let dir = match &args.subdir {
        Some(sub) => {
            // The same rules as a memory path, minus the `.md`.
            validate_rel_path(&format!("{}/x.md", sub.trim_end_matches('/')))?;
            resolved.dir.join(sub)
        }
        None => resolved.dir.clone(),
    };
    let local = FileMemoryStore::open(&dir)?;
    let team = ctx.open_team(url).await?;
    Ok(TeamSync::new(local, team))
}
