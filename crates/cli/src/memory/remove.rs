//! `memory rm` and `memory clear`: deleting memories through the store.

use super::file_topic;
use crate::context::{Context, Io, write_json};
use crate::exit::{Exit, Failure};
use memloop_store::INDEX_FILE;
use serde_json::json;

/// Remove one memory and its index line.
pub async fn rm(ctx: &Context, io: &mut Io<'_>, topic: &str) -> anyhow::Result<()> {
    let rel = file_topic(topic, "removed")?;
    let (_, store) = ctx.open_existing().await?;
    store.delete(&rel).await?;
    if ctx.json {
        return write_json(io.out, &json!({ "removed": rel }));
    }
    writeln!(io.out, "removed {rel}")?;
    Ok(())
}

/// Ask for `yes` on the input stream. Empty input (EOF, e.g. not a terminal and nothing piped)
/// refuses with a hint about `--yes`; any other answer aborts.
fn confirm(io: &mut Io<'_>, question: &str) -> anyhow::Result<()> {
    write!(io.err, "{question} Type `yes` to continue: ")?;
    io.err.flush()?;
    let mut answer = String::new();
    let read = io.input.read_line(&mut answer)?;
    if read == 0 {
        writeln!(io.err)?;
        let how = if io.interactive {
            "no answer"
        } else {
            "stdin is not interactive and gave no answer"
        };
        return Err(Failure::new(
            Exit::Aborted,
            format!(
                "not confirmed ({how}); nothing was deleted. Pass --yes to clear without asking"
            ),
        )
        .into());
    }
    if answer.trim() != "yes" {
        return Err(Failure::new(Exit::Aborted, "not confirmed; nothing was deleted").into());
    }
    Ok(())
}

/// Remove every memory, then the index.
pub async fn clear(ctx: &Context, io: &mut Io<'_>, yes: bool) -> anyhow::Result<()> {
    let (resolved, store) = ctx.open_existing().await?;
    if !yes {
        let count = store.scan().await?.len();
        let index = resolved.dir.join(INDEX_FILE).exists();
        confirm(
            io,
            &format!(
                "This deletes {count} memories{} in {}.",
                if index { " and MEMORY.md" } else { "" },
                resolved.dir.display()
            ),
        )?;
    }
    let removed = store.clear().await?;
    if ctx.json {
        return write_json(io.out, &json!({ "dir": resolved.dir, "removed": removed }));
    }
    writeln!(
        io.out,
        "cleared {}: removed {} memories and the index",
        resolved.dir.display(),
        removed.len()
    )?;
    Ok(())
}
