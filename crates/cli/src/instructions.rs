//! `memloop instructions`: which CLAUDE.md / AGENTS.md files load, their sizes, and what was
//! skipped and why (the loader's [`LoadReport`](memloop_instructions::LoadReport)). The project's
//! memory index is included last, as a session would load it, when the memory dir has one.

use crate::args::InstructionsArgs;
use crate::context::{Context, Io, write_json};
use anyhow::Context as _;
use memloop_files::FileMemoryStore;
use memloop_instructions::{InstructionConfig, InstructionLoader, LoadOptions, MemoryIndexText};
use memloop_store::{INDEX_FILE, MemoryStore};

/// The memory index as a session would load it (caps applied), if the memory dir has one.
async fn memory_index(ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<Option<MemoryIndexText>> {
    let resolved = match ctx.resolve() {
        Ok(r) => r,
        Err(e) => {
            writeln!(
                io.err,
                "warning: memory index not included: {}",
                crate::exit::error_message(&e)
            )?;
            return Ok(None);
        }
    };
    let path = resolved.dir.join(INDEX_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let loaded = FileMemoryStore::open_resolved(&resolved)?
        .load_index()
        .await?;
    Ok(Some(MemoryIndexText {
        path,
        content: loaded.content,
    }))
}

/// Load the instructions for the project and print the report.
pub async fn run(args: &InstructionsArgs, ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    let config = if args.agents {
        InstructionConfig::agents(&ctx.env)
    } else {
        InstructionConfig::claude(&ctx.env)
    };
    let options = LoadOptions {
        touched_files: Vec::new(),
        memory_index: memory_index(ctx, io).await?,
    };
    let loaded = InstructionLoader::new(config)
        .load(&ctx.project, &options)
        .with_context(|| format!("loading instructions for {}", ctx.project.display()))?;
    if ctx.json {
        return write_json(io.out, &loaded.report);
    }
    write!(io.out, "{}", loaded.report)?;
    Ok(())
}
