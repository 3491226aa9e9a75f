//! `memory search`: a ranked, case-insensitive substring search over every memory's name,
//! description, path and body (the store's `scan` + `read`; no index is built).
//!
//! Score of a memory = (sum over query terms of: 3 if the name contains it, 2 if the description
//! does, 1 if the path does, 0.5 per body occurrence up to 5) × (matched terms / query terms), so
//! memories matching every term rank above ones matching a few. Ties: newer first, then path.

use super::header_json;
use crate::context::{Context, Io, write_json};
use memloop_core::truncate_utf8;
use memloop_memory::{MemoryFile, MemoryStore};
use serde_json::{Value, json};

/// One ranked result.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The memory.
    pub file: MemoryFile,
    /// Its score (> 0).
    pub score: f64,
    /// The query terms it matched.
    pub matched: Vec<String>,
    /// The first body line holding a matched term (trimmed, at most 120 bytes).
    pub snippet: Option<String>,
}

/// Lowercase alphanumeric terms of `query`, deduplicated, in order.
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in query
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
    {
        if !out.iter().any(|o| o == t) {
            out.push(t.to_owned());
        }
    }
    out
}

/// Score one memory against `terms` (see the module docs); `None` when nothing matches.
pub fn score(file: &MemoryFile, terms: &[String]) -> Option<Hit> {
    let h = &file.header;
    let stem = h.rel_path.trim_end_matches(".md");
    let name = h.name.as_deref().unwrap_or(stem).to_lowercase();
    let description = h.description.as_deref().unwrap_or("").to_lowercase();
    let path = h.rel_path.to_lowercase();
    let body = file.body.to_lowercase();
    let (mut total, mut matched) = (0.0_f64, Vec::new());
    for t in terms {
        let body_hits = body.matches(t.as_str()).count().min(5);
        let s = 3.0 * f64::from(u8::from(name.contains(t.as_str())))
            + 2.0 * f64::from(u8::from(description.contains(t.as_str())))
            + f64::from(u8::from(path.contains(t.as_str())))
            + 0.5 * body_hits as f64;
        if s > 0.0 {
            total += s;
            matched.push(t.clone());
        }
    }
    if matched.is_empty() {
        return None;
    }
    let coverage = matched.len() as f64 / terms.len() as f64;
    let snippet = file
        .body
        .lines()
        .find(|l| {
            let l = l.to_lowercase();
            matched.iter().any(|t| l.contains(t.as_str()))
        })
        .map(|l| truncate_utf8(l.trim(), 120).to_owned());
    Some(Hit {
        file: file.clone(),
        score: total * coverage,
        matched,
        snippet,
    })
}

/// Rank `files` for `query`, best first, at most `limit`.
pub fn rank(files: Vec<MemoryFile>, query: &str, limit: usize) -> Vec<Hit> {
    let terms = terms(query);
    if terms.is_empty() {
        return Vec::new();
    }
    let mut hits: Vec<Hit> = files.iter().filter_map(|f| score(f, &terms)).collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.file.header.mtime.cmp(&a.file.header.mtime))
            .then(a.file.header.rel_path.cmp(&b.file.header.rel_path))
    });
    hits.truncate(limit);
    hits
}

/// Search the memory dir and print the ranked hits.
pub async fn search(
    ctx: &Context,
    io: &mut Io<'_>,
    query: &str,
    limit: usize,
) -> anyhow::Result<()> {
    let (resolved, store) = ctx.open_existing()?;
    let mut files = Vec::new();
    for h in store.scan().await? {
        match store.read(&h.rel_path).await {
            Ok(f) => files.push(f),
            Err(e) => writeln!(io.err, "warning: skipped {}: {e}", h.rel_path)?,
        }
    }
    let hits = rank(files, query, limit);
    if ctx.json {
        let rows: Vec<Value> = hits
            .iter()
            .map(|hit| {
                let mut v = header_json(&hit.file.header);
                if let Value::Object(map) = &mut v {
                    map.insert("score".into(), json!(hit.score));
                    map.insert("matched".into(), json!(hit.matched));
                    map.insert("snippet".into(), json!(hit.snippet));
                }
                v
            })
            .collect();
        return write_json(io.out, &rows);
    }
    if hits.is_empty() {
        writeln!(
            io.out,
            "no memory in {} matches `{query}`",
            resolved.dir.display()
        )?;
    }
    for hit in &hits {
        let h = &hit.file.header;
        let kind = h.memory_type.map(|t| format!("[{t}] ")).unwrap_or_default();
        let desc = h.description.as_deref().unwrap_or("");
        writeln!(io.out, "{:6.2}  {kind}{}: {desc}", hit.score, h.rel_path)?;
        if let Some(s) = &hit.snippet {
            writeln!(io.out, "        > {s}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use memloop_memory::MemoryHeader;
    use std::time::{Duration, UNIX_EPOCH};

    fn file(path: &str, name: &str, desc: &str, body: &str, secs: u64) -> MemoryFile {
        MemoryFile {
            header: MemoryHeader {
                rel_path: path.into(),
                name: Some(name.into()),
                description: Some(desc.into()),
                memory_type: None,
                mtime: UNIX_EPOCH + Duration::from_secs(secs),
            },
            body: body.into(),
            raw: body.into(),
        }
    }

    #[test]
    fn name_beats_description_beats_body_and_full_coverage_wins() {
        let files = vec![
            file("a.md", "Deploys", "how we ship", "database notes", 1),
            file("b.md", "Misc", "database backups nightly", "", 2),
            file("c.md", "Database", "schema", "", 3),
            file("d.md", "Database deploys", "both terms", "", 0),
        ];
        let order: Vec<_> = rank(files, "database deploys", 10)
            .into_iter()
            .map(|h| h.file.header.rel_path)
            .collect();
        assert_eq!(order, ["d.md", "a.md", "c.md", "b.md"]);
    }

    #[test]
    fn terms_are_lowercase_unique_and_punctuation_free() {
        assert_eq!(terms("DB, db! deploy-time"), ["db", "deploy", "time"]);
        assert!(rank(vec![file("a.md", "x", "y", "z", 0)], "!!", 5).is_empty());
    }
}
