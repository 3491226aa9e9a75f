//! `memloop sessions list|show|search`: the project's session transcripts, read with
//! [`TranscriptDir`] (a torn last line is skipped, as the agent's own reads do). What they print
//! is redacted ([`redact_secrets`]): a password pasted into a session weeks ago is not shown
//! again, whatever the JSONL on disk holds.

use crate::args::SessionsCommand;
use crate::context::{Context, Io, write_json};
use crate::exit::{Exit, Failure};
use memloop_core::message::{ContentBlock, Message};
use memloop_secrets::redact_secrets;
use memloop_transcripts::{RecordKind, SearchOptions, TranscriptDir, TranscriptRecord};
use serde_json::json;

/// Run a `sessions` subcommand.
pub async fn run(cmd: &SessionsCommand, ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    let dir = transcript_dir(ctx).await?;
    match cmd {
        SessionsCommand::List => list(ctx, io, &dir),
        SessionsCommand::Show { id } => show(ctx, io, &dir, id),
        SessionsCommand::Search { query, limit } => {
            search(ctx, io, &dir, &query.join(" "), *limit as usize)
        }
    }
}

/// Where the project's store keeps transcripts.
async fn transcript_dir(ctx: &Context) -> anyhow::Result<TranscriptDir> {
    let (_, store) = ctx.open_existing().await?;
    TranscriptDir::for_store(store.as_ref()).map_err(|why| {
        Failure::new(Exit::NotFound, format!("no session transcripts: {why}")).into()
    })
}

/// The first line of the first user message that is not only a system reminder, cut to 80
/// characters.
fn first_user_line(records: &[&TranscriptRecord]) -> String {
    records
        .iter()
        .filter(|r| r.kind == RecordKind::User)
        .filter_map(|r| r.to_message())
        .flat_map(|m| m.content)
        .filter_map(|b| match b {
            ContentBlock::Text { text } if !text.starts_with("<system-reminder>") => Some(text),
            _ => None,
        })
        .find_map(|t| t.lines().find(|l| !l.trim().is_empty()).map(str::to_owned))
        .map(|l| redact_secrets(&l).0.chars().take(80).collect())
        .unwrap_or_default()
}

fn list(ctx: &Context, io: &mut Io<'_>, dir: &TranscriptDir) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for s in dir.list()? {
        let t = dir.load(&s.id)?;
        let records = t.message_records();
        rows.push(json!({
            "id": s.id,
            "modified": s.modified_rfc3339(),
            "bytes": s.bytes,
            "messages": records.len(),
            "first": first_user_line(&records),
        }));
    }
    if ctx.json {
        return write_json(io.out, &rows);
    }
    if rows.is_empty() {
        writeln!(io.out, "no sessions in {}", dir.dir().display())?;
    }
    for r in &rows {
        writeln!(
            io.out,
            "{}  {}  {:>4} messages  {}",
            r["id"].as_str().unwrap_or(""),
            r["modified"].as_str().unwrap_or(""),
            r["messages"],
            r["first"].as_str().unwrap_or("")
        )?;
    }
    Ok(())
}

/// One message as readable lines.
fn render(m: &Message) -> String {
    let mut out = Vec::new();
    for b in &m.content {
        match b {
            ContentBlock::Text { text } => out.push(text.clone()),
            ContentBlock::ToolUse { name, input, .. } => out.push(format!("→ {name} {input}")),
            ContentBlock::ToolResult {
                content, is_error, ..
            } => out.push(format!(
                "← {}{}",
                if *is_error { "(error) " } else { "" },
                content.text()
            )),
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
            ContentBlock::Image { .. } => out.push("[image]".into()),
            ContentBlock::Document { .. } => out.push("[document]".into()),
        }
    }
    out.join("\n")
}

fn show(ctx: &Context, io: &mut Io<'_>, dir: &TranscriptDir, id: &str) -> anyhow::Result<()> {
    let t = dir.load(id)?;
    if t.skipped_lines > 0 {
        writeln!(
            io.err,
            "warning: {} unreadable line(s) skipped (a torn last line is what a crash mid-write leaves)",
            t.skipped_lines
        )?;
    }
    let records: Vec<TranscriptRecord> = t
        .message_records()
        .into_iter()
        .map(TranscriptRecord::redacted)
        .collect();
    if ctx.json {
        let rows: Vec<_> = records
            .iter()
            .map(|r| {
                json!({
                    "type": r.kind,
                    "uuid": r.uuid,
                    "timestamp": r.timestamp,
                    "message": r.message,
                })
            })
            .collect();
        return write_json(io.out, &rows);
    }
    for r in &records {
        let role = match r.kind {
            RecordKind::Assistant => "assistant",
            _ => "user",
        };
        let body = r.to_message().map_or_else(|| r.text(), |m| render(&m));
        // Each string of the record is redacted already; the rendered body is checked again, as
        // a credential can span what were two strings (`→ login {"password":…}`).
        let body = redact_secrets(&body).0;
        writeln!(io.out, "── {role} · {}\n{body}\n", r.timestamp)?;
    }
    Ok(())
}

fn search(
    ctx: &Context,
    io: &mut Io<'_>,
    dir: &TranscriptDir,
    query: &str,
    limit: usize,
) -> anyhow::Result<()> {
    let hits = dir.search(
        query,
        &SearchOptions {
            limit,
            ..SearchOptions::default()
        },
    )?;
    if ctx.json {
        return write_json(io.out, &hits);
    }
    if hits.is_empty() {
        writeln!(io.out, "no past message matches `{query}`")?;
    }
    for h in hits {
        writeln!(
            io.out,
            "{} · {} · {}: {}",
            h.session_id, h.timestamp, h.role, h.snippet
        )?;
    }
    Ok(())
}
