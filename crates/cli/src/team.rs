//! `memloop team push|pull|status`: sync the memory dir (or a subfolder) with the team store.

use crate::args::{TeamCommand, TeamSyncArgs};
use crate::context::{Context, Io, write_json};
use crate::exit::{Exit, Failure};
use crate::progress::Progress;
use memloop_files::FileMemoryStore;
use memloop_pg::{PgConfig, SyncAction, SyncOptions, SyncReport, TeamSync};
use memloop_store::validate_rel_path;
use std::sync::Arc;

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
    // A bar over a large sync, on a terminal only (see `progress`).
    let bar = Arc::new(Progress::new(&format!("team {verb}"), &ctx.env));
    let shown = bar.clone();
    let sync = open_sync(ctx, args, &url)
        .await?
        .progress(Arc::new(move |done, total| shown.set(done, total)));
    let opts = SyncOptions { prune: args.prune };
    let report = match cmd {
        TeamCommand::Push(_) => sync.push(opts).await,
        TeamCommand::Pull(_) => sync.pull(opts).await,
        TeamCommand::Status(_) => sync.status().await,
    };
    bar.finish();
    let report = report?;
    if ctx.json {
        write_json(io.out, &report)?;
        return outcome(&report, verb);
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
    outcome(&report, verb)
}

/// The run's exit: failures (including secret refusals) before conflicts, each with a one-line
/// summary (printed on stderr by `main`); `Ok` when every entry went through.
fn outcome(report: &SyncReport, verb: &str) -> anyhow::Result<()> {
    let failed = report.count(|a| matches!(a, SyncAction::Failed { .. }));
    let refused = report.count(|a| matches!(a, SyncAction::SecretRefused { .. }));
    let conflicts = report.conflicts();
    if failed + refused + conflicts == 0 {
        return Ok(());
    }
    let done = report.count(|a| {
        matches!(
            a,
            SyncAction::Pushed { .. }
                | SyncAction::Pulled { .. }
                | SyncAction::DeletedRemote
                | SyncAction::DeletedLocal
        )
    });
    let summary = format!(
        "team {verb}: {done} synced, {failed} failed, {refused} refused by the secret filter, \
         {conflicts} conflict(s)"
    );
    let exit = if failed + refused > 0 {
        Exit::SyncFailed
    } else {
        Exit::SyncConflict
    };
    Err(Failure::new(exit, summary).into())
}

async fn open_sync(ctx: &Context, args: &TeamSyncArgs, url: &str) -> anyhow::Result<TeamSync> {
    let resolved = ctx.resolve()?;
    // With private and team memory in one dir (`MEMLOOP_TEAM_MEMORY`), only `team/` is shared.
    let team_memory = ctx
        .env
        .switch(memloop_paths::env::TEAM_MEMORY)
        .then(|| memloop_store::TEAM_DIR.to_owned());
    let dir = match args.subdir.as_ref().or(team_memory.as_ref()) {
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
