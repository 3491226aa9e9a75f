//! `memory edit`: edit a memory in `$VISUAL` / `$EDITOR`, validate it, save it through the store.
//!
//! The editor works on a private temp copy (mode 0600, in the system temp dir), never on the
//! memory file itself, so a half-saved or refused edit cannot corrupt the memory dir. The result
//! must have parseable frontmatter; it is then written as the user saved it (frontmatter keys
//! memloop does not know and comments kept) with `write_raw_if`, which applies the store's
//! write rules (no credential anywhere in the text, size, scope) and updates its `MEMORY.md`
//! line under the store lock. The version read before the editor opened is the write's
//! expected version, checked under the same lock: if the memory changed on disk meanwhile, the
//! edit is refused rather than clobbering that change. When
//! anything refuses the edit, the temp copy is kept as a recovery file and its path is printed:
//! an edit is never lost.

use super::file_topic;
use crate::context::{Context, Io, write_json};
use crate::exit::{Exit, Failure};
use anyhow::Context as _;
use memloop_host::env::EnvVars;
use memloop_store::{
    ExpectedVersion, MemoryDoc, MemoryError, MemoryStore, WriteReport, content_version,
};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use tempfile::NamedTempFile;

/// The editor when neither `$VISUAL` nor `$EDITOR` is set, as `git` and Claude Code do.
const FALLBACK_EDITOR: &str = if cfg!(windows) { "notepad" } else { "vi" };

/// The editor command: `$VISUAL`, else `$EDITOR` (empty counts as unset), else `vi`
/// (`notepad` on Windows).
fn editor_command(env: &EnvVars) -> String {
    env.get("VISUAL")
        .or_else(|| env.get("EDITOR"))
        .unwrap_or(FALLBACK_EDITOR)
        .to_owned()
}

fn template(stem: &str) -> String {
    format!(
        "---\nname: {stem}\ndescription: one specific line saying when this memory matters\ntype: project\n---\n\n"
    )
}

/// Keep the temp copy and say where it is.
fn keep(tmp: NamedTempFile) -> anyhow::Result<PathBuf> {
    let (_, path) = tmp
        .keep()
        .context("keeping the recovery copy of your edit")?;
    Ok(path)
}

/// Run the editor on `path` through the shell, so `EDITOR="code --wait"` works.
async fn run_editor(editor: &str, path: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    let mut cmd = {
        let mut c = tokio::process::Command::new("sh");
        c.arg("-c")
            .arg(format!("{editor} \"$1\""))
            .arg("memloop-edit")
            .arg(path);
        c
    };
    #[cfg(not(unix))]
    let mut cmd = {
        let mut parts = editor.split_whitespace();
        let program = parts.next().unwrap_or(editor);
        let mut c = tokio::process::Command::new(program);
        c.args(parts).arg(path);
        c
    };
    let status = cmd
        .status()
        .await
        .with_context(|| format!("starting the editor `{editor}`"))?;
    if !status.success() {
        anyhow::bail!("the editor `{editor}` exited with {status}");
    }
    Ok(())
}

/// Edit one memory (a new topic starts from a template and is only created when changed).
pub async fn edit(ctx: &Context, io: &mut Io<'_>, topic: &str) -> anyhow::Result<()> {
    let rel = file_topic(topic, "edited")?;
    let editor = editor_command(&ctx.env);
    let (_, store) = ctx.open_or_create().await?;
    let stem = rel
        .rsplit('/')
        .next()
        .unwrap_or(&rel)
        .trim_end_matches(".md");
    let existing = match store.read(&rel).await {
        Ok(file) => Some(file.raw),
        Err(MemoryError::NotFound(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let original = existing.clone().unwrap_or_else(|| template(stem));
    let prefix: String = stem
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!("memloop-edit-{prefix}-"))
        .suffix(".md")
        .tempfile()
        .context("creating the temp copy to edit")?;
    tmp.write_all(original.as_bytes())
        .and_then(|()| tmp.flush())
        .context("writing the temp copy to edit")?;
    if let Err(e) = run_editor(&editor, tmp.path()).await {
        let kept = keep(tmp)?;
        return Err(e.context(format!(
            "memory unchanged; whatever the editor saved is kept in {}",
            kept.display()
        )));
    }
    let edited = std::fs::read(tmp.path()).context("reading back the edited file")?;
    if edited == original.as_bytes() {
        writeln!(io.err, "no changes; {rel} left as it was")?;
        if ctx.json {
            write_json(io.out, &json!({ "path": rel, "changed": false }))?;
        }
        return Ok(());
    }
    let (doc, report) = match save(store.as_ref(), &rel, stem, existing.as_deref(), edited).await {
        Ok(saved) => saved,
        Err(e) => {
            let kept = keep(tmp)?;
            return Err(e.context(format!(
                "your edit was not saved; it is kept in {}",
                kept.display()
            )));
        }
    };
    if doc.description.trim().is_empty() {
        writeln!(
            io.err,
            "warning: {rel} has no description; selectors match on it"
        )?;
    }
    if ctx.json {
        return write_json(
            io.out,
            &json!({ "path": rel, "changed": true, "created": report.created }),
        );
    }
    let verb = if report.created { "created" } else { "saved" };
    writeln!(io.out, "{verb} {rel}")?;
    Ok(())
}

fn refused(reason: impl Into<String>) -> anyhow::Error {
    Failure::new(Exit::Refused, reason).into()
}

/// Validate the edited bytes and write them through the store, unless the memory changed on
/// disk since it was read (`existing`).
async fn save(
    store: &dyn MemoryStore,
    rel: &str,
    stem: &str,
    existing: Option<&str>,
    edited: Vec<u8>,
) -> anyhow::Result<(MemoryDoc, WriteReport)> {
    let text =
        String::from_utf8(edited).map_err(|_| refused("the edited file is not valid UTF-8"))?;
    let doc = MemoryDoc::parse(&text, stem).map_err(refused)?;
    // The store's rules (secrets anywhere in the text, size, scope) and the version check, in
    // one step under its lock: if someone else (an agent, another editor) changed the memory
    // meanwhile, nothing is written.
    let expected = match existing {
        Some(text) => ExpectedVersion::Is(content_version(text)),
        None => ExpectedVersion::Absent,
    };
    match store.write_raw_if(rel, &text, &expected).await {
        Ok(written) => Ok((doc, written.report)),
        Err(MemoryError::VersionConflict { .. }) => Err(refused(format!(
            "{rel} changed on disk while you were editing it"
        ))),
        Err(e) => Err(e.into()),
    }
}
