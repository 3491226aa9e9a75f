//! "Sessions touched since the last consolidation" (the dream's session gate).

use crate::types::MemoryError;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Where the session gate counts sessions. Injectable so hosts with another transcript layout
/// (or tests) can supply their own.
pub trait SessionSource: Send + Sync {
    /// Ids of the sessions touched after `since`, excluding `current`.
    fn touched_since(&self, since: SystemTime, current: &str) -> Result<Vec<String>, MemoryError>;
}

/// Sessions as entries of a project dir: a transcript file `<id>.<ext>` (Claude Code's
/// `<id>.jsonl`) or a session dir `<id>/` (memloop's `<id>/session-memory/...`). A session is
/// touched when the newest mtime of the file, or of the dir and its entries up to two levels
/// down, is after `since`. Hidden entries and the memory dir itself are ignored; a file and a
/// dir with the same id count once.
#[derive(Debug, Clone)]
pub struct ProjectDirSessions {
    dir: PathBuf,
    ignore: Option<std::ffi::OsString>,
}

impl ProjectDirSessions {
    /// Count sessions in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            ignore: None,
        }
    }

    /// The project dir of a memory dir laid out as `<project dir>/memory/` (memloop's and Claude
    /// Code's default): its parent, ignoring the memory dir itself.
    pub fn for_memory_dir(memory_dir: &Path) -> Self {
        Self {
            dir: memory_dir.parent().unwrap_or(memory_dir).to_path_buf(),
            ignore: memory_dir.file_name().map(ToOwned::to_owned),
        }
    }
}

fn newest_mtime(path: &Path, depth: u32) -> Option<SystemTime> {
    let meta = std::fs::metadata(path).ok()?;
    let mut newest = meta.modified().ok()?;
    if meta.is_dir() && depth > 0 {
        for e in std::fs::read_dir(path).ok()?.filter_map(Result::ok) {
            if let Some(t) = newest_mtime(&e.path(), depth - 1) {
                newest = newest.max(t);
            }
        }
    }
    Some(newest)
}

impl SessionSource for ProjectDirSessions {
    fn touched_since(&self, since: SystemTime, current: &str) -> Result<Vec<String>, MemoryError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(MemoryError::io(
                    format!("listing sessions in {}", self.dir.display()),
                    e,
                ));
            }
        };
        let mut ids = BTreeSet::new();
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name();
            if self.ignore.as_ref() == Some(&name) || name.to_string_lossy().starts_with('.') {
                continue;
            }
            let path = e.path();
            let id = if path.is_dir() {
                name.to_string_lossy().into_owned()
            } else {
                match path.file_stem() {
                    Some(s) => s.to_string_lossy().into_owned(),
                    None => continue,
                }
            };
            if id == current {
                continue;
            }
            if newest_mtime(&path, 2).is_some_and(|t| t > since) {
                ids.insert(id);
            }
        }
        Ok(ids.into_iter().collect())
    }
}
