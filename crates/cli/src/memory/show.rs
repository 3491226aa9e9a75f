//! `memory` alone, `memory list` and `memory show`: reading the memory dir.

use super::{Topic, header_json, parse_topic};
use crate::context::{Context, Io, write_json};
use anyhow::Context as _;
use memloop_recall::format_manifest;
use memloop_store::{INDEX_FILE, MemoryError, MemoryScope, MemoryType};
use serde_json::{Value, json};

/// `memloop memory` alone: the memory dir, its index (bytes and lines) and every memory with
/// its size in bytes, newest first, then the total.
pub async fn overview(ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    let (resolved, store) = ctx.open_existing().await?;
    let size_of = |rel: &str| {
        std::fs::symlink_metadata(resolved.dir.join(rel))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    let index = memloop_host::files::read_regular(&resolved.dir.join(INDEX_FILE)).ok();
    let index_lines = index
        .as_deref()
        .map_or(0, |b| String::from_utf8_lossy(b).lines().count());
    let headers = store.scan().await?;
    let sizes: Vec<u64> = headers.iter().map(|h| size_of(&h.rel_path)).collect();
    let total: u64 = sizes.iter().sum();
    if ctx.json {
        let memories: Vec<Value> = headers
            .iter()
            .zip(&sizes)
            .map(|(h, size)| {
                let mut v = header_json(h);
                v["bytes"] = json!(size);
                v
            })
            .collect();
        return write_json(
            io.out,
            &json!({
                "memory_dir": resolved.dir,
                "index": index.as_ref().map(|b| json!({"bytes": b.len(), "lines": index_lines})),
                "memories": memories,
                "total_bytes": total,
            }),
        );
    }
    writeln!(io.out, "Memory dir: {}", resolved.dir.display())?;
    match &index {
        Some(b) => writeln!(
            io.out,
            "{INDEX_FILE}: {} bytes, {index_lines} lines",
            b.len()
        )?,
        None => writeln!(io.out, "{INDEX_FILE}: not written yet")?,
    }
    if headers.is_empty() {
        writeln!(io.out, "no memories")?;
        return Ok(());
    }
    let width = sizes.iter().max().map_or(1, |m| m.to_string().len());
    for (h, size) in headers.iter().zip(&sizes) {
        let what = h.description.as_deref().or(h.name.as_deref()).unwrap_or("");
        writeln!(io.out, "{size:>width$}  {}  {what}", h.rel_path)?;
    }
    writeln!(
        io.out,
        "{} memories, {total} bytes (`memloop memory show TOPIC` prints one)",
        headers.len()
    )?;
    Ok(())
}

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
            let text = match memloop_host::files::read_regular(&path) {
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
