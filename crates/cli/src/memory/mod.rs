//! `memloop memory ...`: one module per command group.

mod dream;
mod edit;
mod path;
mod remove;
mod search;
mod show;
mod topic;

use crate::args::MemoryCommand;
use crate::context::{Context, Io};
pub use show::overview;
pub use topic::{Topic, parse_topic};
use topic::{file_topic, header_json};

/// Run a `memory` subcommand.
pub async fn run(cmd: &MemoryCommand, ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    match cmd {
        MemoryCommand::Path => path::path(ctx, io),
        MemoryCommand::List { memory_type } => show::list(ctx, io, *memory_type).await,
        MemoryCommand::Show { topic } => show::show(ctx, io, topic).await,
        MemoryCommand::Edit { topic } => edit::edit(ctx, io, topic).await,
        MemoryCommand::Rm { topic } => remove::rm(ctx, io, topic).await,
        MemoryCommand::Clear { yes } => remove::clear(ctx, io, *yes).await,
        MemoryCommand::Dream { force, model } => dream::dream(ctx, io, *force, model).await,
        MemoryCommand::Search {
            query,
            limit,
            semantic,
            lexical,
            embed,
        } => {
            let embedder = match (semantic, lexical) {
                (_, true) => None,
                (true, false) => match crate::embed::embedder_if_configured(embed, &ctx.env).await?
                {
                    Some(embedder) => Some(embedder),
                    None => Some(crate::embed::embedder(embed, &ctx.env).await?),
                },
                (false, false) => crate::embed::embedder_if_configured(embed, &ctx.env).await?,
            };
            search::search(ctx, io, &query.join(" "), *limit as usize, embedder).await
        }
    }
}
