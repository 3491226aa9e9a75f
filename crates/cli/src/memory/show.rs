//! `memory list` and `memory show`: reading the memory dir.

use super::{Topic, header_json, parse_topic};
use crate::context::{Context, Io, write_json};
use anyhow::Context as _;
use memloop_recall::format_manifest;
use memloop_store::{INDEX_FILE, MemoryError, MemoryScope, MemoryType};
use serde_json::{Value, json};

/// List the manifest, newest first, optionally only one type.
pub async fn list(ctx: &Context, io: &mut Io<'_>, only: Option<MemoryType>) -> anyhow::Result<()> {
    let (resolved, store) = ctx.open_existing().await?;
    let headers: Vec<_> = store
        .scan()
        .await?
        .into_iter()
        .filter(|h| only.is_none() || h.memory_type == only)
        .collect();
    if ctx.json {
        return write_json(
            io.out,
            &headers.iter().map(header_json).collect::<Vec<Value>>(),
        );
    }
    if headers.is_empty() {
        writeln!(io.out, "no memories in {}", resolved.dir.display())?;
    } else {
        writeln!(io.out, "{}", format_manifest(&headers))?;
    }
    Ok(())
}

/// Print one memory, or the index for `MEMORY`.
pub async fn show(ctx: &Context, io: &mut Io<'_>, topic: &str) -> anyhow::Result<()> {
    let topic = parse_topic(topic)?;
    let (resolved, store) = ctx.open_existing().await?;
    match topic {
        Topic::Index => {
            let path = resolved.dir.join(INDEX_FILE);
            let text = match memloop_core::files::read_regular(&path) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(MemoryError::NotFound(INDEX_FILE.into()).into());
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("reading {}", path.display()));
                }
            };
            if ctx.json {
                // This file's entries (team memories are indexed in `team/MEMORY.md`).
                let entries: Vec<_> = store
                    .index_entries()
                    .await?
                    .into_iter()
                    .filter(|e| MemoryScope::of(&e.file) == MemoryScope::Private)
                    .collect();
                return write_json(
                    io.out,
                    &json!({ "path": INDEX_FILE, "content": text, "entries": entries }),
                );
            }
            write!(io.out, "{text}")?;
        }
        Topic::File(rel) => {
            let file = store.read(&rel).await?;
            if ctx.json {
                let mut v = header_json(&file.header);
                if let Value::Object(map) = &mut v {
                    map.insert("body".into(), Value::String(file.body));
                    map.insert("raw".into(), Value::String(file.raw));
                }
                return write_json(io.out, &v);
            }
            write!(io.out, "{}", file.raw)?;
            if !file.raw.ends_with('\n') {
                writeln!(io.out)?;
            }
        }
    }
    Ok(())
}
