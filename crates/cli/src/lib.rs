//! # memloop-cli
//!
//! The `memloop` command line: inspect and edit a project's memory dir (`memory path|list|show|
//! edit|rm|clear|search`), list, show and search past sessions' transcripts (`sessions
//! list|show|search`), see which instruction files load (`instructions`), serve project
//! memory to MCP clients (`mcp`), and with the `postgres` feature sync it with the team store
//! (`team push|pull|status`). Every command
//! prints human text, or JSON with `--json`, and exits with a code from [`Exit`]. Human text
//! bound for a terminal shows control characters instead of obeying them ([`terminal`]).
#![warn(missing_docs)]

pub mod args;
pub mod context;
pub mod embed;
pub mod exit;
pub mod instructions;
pub mod mcp;
#[cfg(feature = "postgres")]
pub mod mcp_team;
pub mod memory;
#[cfg(feature = "candle")]
pub mod models;
pub mod progress;
pub mod sessions;
pub mod table;
#[cfg(feature = "postgres")]
pub mod team;
pub mod terminal;

pub use args::Cli;
pub use context::{Context, Io};
pub use exit::{Exit, Failure, error_message, exit_for, is_broken_pipe};

use args::Command;

/// Run one parsed command line. Errors carry their exit code (see [`exit_for`]).
pub async fn run(cli: &Cli, ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    match &cli.command {
        Command::Memory(args) => match &args.command {
            Some(cmd) => memory::run(cmd, ctx, io).await,
            None => memory::overview(ctx, io).await,
        },
        Command::Instructions(args) => instructions::run(args, ctx, io).await,
        Command::Sessions(cmd) => sessions::run(cmd, ctx, io).await,
        Command::Mcp(args) => mcp::run(args, ctx).await,
        #[cfg(feature = "postgres")]
        Command::Team(cmd) => team::run(cmd, ctx, io).await,
        #[cfg(feature = "candle")]
        Command::Models(cmd) => models::run(cmd, ctx, io).await,
    }
}
