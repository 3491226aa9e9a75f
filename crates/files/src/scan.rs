//! Scanning a memory dir: every `*.md` except `MEMORY.md`, recursively, reading
//! only the first lines of each file for its frontmatter, newest first.

use memloop_store::INDEX_FILE;
use memloop_store::parse_memory;
use memloop_store::{MemoryError, MemoryHeader};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// Scan limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanConfig {
    /// Lines read per file for the frontmatter (30).
    pub max_lines: usize,
    /// Bytes read per file at most, whatever the line count (64 KiB): a file with one huge line
    /// is never read whole.
    pub max_bytes: u64,
    /// Worker threads reading headers (default: available parallelism, at most 8).
    pub threads: usize,
}

impl Default for ScanConfig {
    fn default() -> Self {
        Self {
            max_lines: 30,
            max_bytes: 64 * 1024,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get().min(8)),
        }
    }
}

/// Scan `root`: headers of all memory files, newest first (ties by path). Hidden entries
/// (leading `.`: temp files, the lock, `.git`) are skipped; a symlinked file counts when it
/// resolves to a file inside the dir (symlinked dirs are not followed); non-UTF-8 files are read
/// lossily with a warning; unreadable or binary (NUL byte) files are skipped with a `tracing`
/// warning. A missing root is empty.
/// Blocking: call from `spawn_blocking` in async code.
#[cfg(test)]
pub fn scan_dir(root: &Path, cfg: &ScanConfig) -> Result<Vec<MemoryHeader>, MemoryError> {
    scan_dir_cached(root, cfg, &HeaderCache::default())
}

/// Headers remembered by file size and mtime (as seen by the `fstat` of the read that produced
/// them), so a rescan only `stat`s unchanged files instead of opening and parsing them. Files
/// that were skipped (binary, non-UTF-8, unreadable) are remembered too, so while they stay
/// unchanged a rescan neither reopens them nor logs the warning again.
#[derive(Debug, Default)]
pub struct HeaderCache {
    entries: Mutex<HashMap<PathBuf, Cached>>,
}

/// One file's scan result at a given size and mtime; `header: None` means "skipped".
#[derive(Debug, Clone)]
struct Cached {
    len: u64,
    mtime: SystemTime,
    header: Option<MemoryHeader>,
}

impl HeaderCache {
    /// Number of cached headers.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.count(|c| c.header.is_some())
    }

    /// Number of remembered skipped files (binary, non-UTF-8 or unreadable at their current
    /// size and mtime).
    #[cfg(test)]
    pub fn skipped(&self) -> usize {
        self.count(|c| c.header.is_none())
    }

    #[cfg(test)]
    fn count(&self, f: impl Fn(&Cached) -> bool) -> usize {
        self.entries
            .lock()
            .map_or(0, |m| m.values().filter(|c| f(c)).count())
    }
}

/// [`scan_dir`] with a [`HeaderCache`]: unchanged files (same size and mtime) are not re-read.
/// The cache is replaced by this scan's results, so deleted files drop out of it.
pub fn scan_dir_cached(
    root: &Path,
    cfg: &ScanConfig,
    cache: &HeaderCache,
) -> Result<Vec<MemoryHeader>, MemoryError> {
    let files = walk(root)?;
    let old = cache
        .entries
        .lock()
        .map(|mut m| std::mem::take(&mut *m))
        .unwrap_or_default();
    let threads = cfg.threads.clamp(1, 64);
    let one = |f: &Found| header_for(f, cfg, &old);
    let found: Vec<(PathBuf, Cached)> = if threads == 1 || files.len() < 64 {
        files.iter().filter_map(one).collect()
    } else {
        let chunk = files.len().div_ceil(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = files
                .chunks(chunk)
                .map(|part| s.spawn(move || part.iter().filter_map(one).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    let mut headers: Vec<MemoryHeader> =
        found.iter().filter_map(|(_, c)| c.header.clone()).collect();
    if let Ok(mut m) = cache.entries.lock() {
        *m = found.into_iter().collect();
    }
    headers.sort_by(|a, b| {
        b.mtime
            .cmp(&a.mtime)
            .then_with(|| a.rel_path.cmp(&b.rel_path))
    });
    Ok(headers)
}

fn header_for(
    f: &Found,
    cfg: &ScanConfig,
    old: &HashMap<PathBuf, Cached>,
) -> Option<(PathBuf, Cached)> {
    if let Some(c) = old.get(&f.abs) {
        let same = std::fs::metadata(&f.abs)
            .ok()
            .is_some_and(|m| m.len() == c.len && m.modified().ok() == Some(c.mtime));
        if same {
            return Some((f.abs.clone(), c.clone()));
        }
    }
    read_header(f, cfg).map(|c| (f.abs.clone(), c))
}

/// A memory file found by the walk: absolute path and `/`-separated relative path.
pub(crate) struct Found {
    pub(crate) abs: PathBuf,
    pub(crate) rel: String,
}

/// The header of the one memory file `rel` under `root`, by the walk's rules (a regular `*.md`
/// file other than `MEMORY.md`, or a symlink resolving to a file inside the dir; not hidden),
/// or `None` when there is no such memory (gone, not a memory, or skipped as unreadable).
pub(crate) fn header_at(root: &Path, rel: &str, cfg: &ScanConfig) -> Option<MemoryHeader> {
    let hidden = rel.split('/').any(|c| c.starts_with('.') || c.is_empty());
    let name = rel.rsplit('/').next().unwrap_or(rel);
    // Every `MEMORY.md` is an index (the memory dir's and `team/`'s), never a memory.
    if hidden || !name.ends_with(".md") || name == INDEX_FILE || !store_can_name(rel) {
        return None;
    }
    let abs = root.join(rel);
    let meta = std::fs::symlink_metadata(&abs).ok()?;
    let ft = meta.file_type();
    let memory = ft.is_file()
        || (ft.is_symlink()
            && std::fs::canonicalize(&abs).ok().is_some_and(|t| {
                t.is_file()
                    && std::fs::canonicalize(root)
                        .ok()
                        .is_some_and(|r| t.starts_with(r))
            }));
    if !memory {
        return None;
    }
    let found = Found {
        abs,
        rel: rel.to_owned(),
    };
    read_header(&found, cfg).and_then(|c| c.header)
}

/// Whether the store's own calls can name `rel` (see `validate_rel_path`): a file whose name
/// holds a control character, `..` or more than 200 characters cannot be read, written or
/// removed through the store, and a line break in it would forge lines of the manifest a
/// selector or an extractor is shown. Such a file is skipped with a warning that shows its name
/// escaped.
fn store_can_name(rel: &str) -> bool {
    match memloop_store::validate_rel_path(rel) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "skipping a file whose name the memory store refuses");
            false
        }
    }
}

/// Every memory file under `root` (the scan's walk: hidden entries skipped, symlinked dirs not
/// followed, names the store refuses skipped with a warning). Blocking.
pub(crate) fn walk(root: &Path) -> Result<Vec<Found>, MemoryError> {
    let mut out = Vec::new();
    let canonical_root = std::fs::canonicalize(root).ok();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if prefix.is_empty() && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(out);
            }
            Err(e) if prefix.is_empty() => {
                return Err(MemoryError::io(
                    format!("reading memory dir {}", dir.display()),
                    e,
                ));
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "skipping unreadable directory");
                continue;
            }
        };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                tracing::warn!(path = %entry.path().display(), "skipping non-UTF-8 file name");
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            if ft.is_dir() {
                stack.push((entry.path(), rel));
            } else if ft.is_file() && name.ends_with(".md") && name != INDEX_FILE {
                if !store_can_name(&rel) {
                    continue;
                }
                out.push(Found {
                    abs: entry.path(),
                    rel,
                });
            } else if ft.is_symlink()
                && name.ends_with(".md")
                && name != INDEX_FILE
                && store_can_name(&rel)
            {
                // A symlinked file is a memory when it resolves to a file inside the dir.
                let target = std::fs::canonicalize(entry.path()).ok();
                let inside = target.as_ref().is_some_and(|t| {
                    t.is_file() && canonical_root.as_ref().is_some_and(|r| t.starts_with(r))
                });
                if inside {
                    out.push(Found {
                        abs: entry.path(),
                        rel,
                    });
                } else {
                    tracing::warn!(
                        path = %entry.path().display(),
                        "skipping symlink that does not resolve to a file inside the memory dir"
                    );
                }
            } else if ft.is_symlink() {
                tracing::debug!(path = %entry.path().display(), "not following symlink");
            }
        }
    }
    Ok(out)
}

/// Size and mtime of `meta`.
fn stamp(meta: std::io::Result<std::fs::Metadata>) -> std::io::Result<(SystemTime, u64)> {
    meta.and_then(|m| Ok((m.modified()?, m.len())))
}

/// The header of one file, or a negative entry when it is skipped (warned once; `None` only when
/// even its size and mtime are unknown, so it is retried next time).
fn read_header(f: &Found, cfg: &ScanConfig) -> Option<Cached> {
    let skip = |why: &dyn std::fmt::Display, known: Option<(SystemTime, u64)>| {
        tracing::warn!(path = %f.abs.display(), reason = %why, "skipping memory file");
        let (mtime, len) = known.or_else(|| stamp(std::fs::metadata(&f.abs)).ok())?;
        Some(Cached {
            len,
            mtime,
            header: None,
        })
    };
    let file = match File::open(&f.abs) {
        Ok(file) => file,
        Err(e) => return skip(&e, None),
    };
    let (mtime, len) = match stamp(file.metadata()) {
        Ok(t) => t,
        Err(e) => return skip(&e, None),
    };
    let known = Some((mtime, len));
    let mut reader = BufReader::with_capacity(8 * 1024, file.take(cfg.max_bytes));
    let mut buf = Vec::with_capacity(2048);
    for _ in 0..cfg.max_lines {
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return skip(&e, known),
        }
    }
    if buf.contains(&0) {
        return skip(&"binary content (NUL byte)", known);
    }
    let lossy: String;
    let text = match std::str::from_utf8(&buf) {
        Ok(t) => t,
        // Cut mid-character by the byte cap: keep the valid prefix.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&buf[..e.valid_up_to()]).ok()?,
        Err(_) => {
            lossy = String::from_utf8_lossy(&buf).into_owned();
            tracing::warn!(
                path = %f.abs.display(),
                "memory file is not valid UTF-8 (Latin-1?); read lossily, invalid bytes replaced"
            );
            &lossy
        }
    };
    let fm = parse_memory(text).frontmatter.unwrap_or_default();
    let header = MemoryHeader {
        rel_path: f.rel.clone(),
        name: fm.name,
        description: fm.description,
        memory_type: fm.memory_type,
        mtime,
    };
    Some(Cached {
        len,
        mtime,
        header: Some(header),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
