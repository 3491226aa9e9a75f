//! "Sessions touched since the last consolidation" (the dream's session gate).

use memloop_store::MemoryError;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Where the session gate counts sessions. Injectable so hosts with another transcript layout
/// (or tests) can supply their own.
pub trait SessionSource: Send + Sync {
    /// Ids of the sessions touched after `since`, excluding `current`.
    fn touched_since(&self, since: SystemTime, current: &str) -> Result<Vec<String>, MemoryError>;

    /// Note that session `id` is running (called by the dream hook once per session, from a
    /// blocking context). Sources that read sessions from elsewhere keep the default no-op.
    fn record(&self, _id: &str) -> Result<(), MemoryError> {
        Ok(())
    }
}

/// Name of the dir, inside the memory dir, that holds one record per session (hidden, so scans,
/// selectors and the index never see it).
pub const SESSIONS_DIR: &str = ".sessions";

/// Sessions as the records memloop itself writes: one small file per session in
/// `<memory dir>/.sessions/`, written at the session's first turn end by the dream hook
/// (whatever else is configured: compaction, transcripts or none). A session counts as touched
/// when its record's mtime is after `since`. This is the default session source.
#[derive(Debug, Clone)]
pub struct SessionRecords {
    dir: PathBuf,
}

impl SessionRecords {
    /// Records in `<memory_dir>/.sessions/`.
    pub fn for_memory_dir(memory_dir: &Path) -> Self {
        Self {
            dir: memory_dir.join(SESSIONS_DIR),
        }
    }

    /// The record file of session `id`: the id itself when it is a plain name (letters, digits,
    /// `-`, `_`, at most 128 characters), else a hash of it.
    fn file_of(&self, id: &str) -> PathBuf {
        let plain = !id.is_empty()
            && id.len() <= 128
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let name = if plain {
            id.to_owned()
        } else {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(id.as_bytes());
            digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
        };
        self.dir.join(format!("{name}.session"))
    }
}

impl SessionSource for SessionRecords {
    fn touched_since(&self, since: SystemTime, current: &str) -> Result<Vec<String>, MemoryError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(MemoryError::io(
                    format!("listing session records in {}", self.dir.display()),
                    e,
                ));
            }
        };
        let current = self.file_of(current);
        let mut ids = BTreeSet::new();
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            if path == current || path.extension().is_none_or(|x| x != "session") {
                continue;
            }
            let touched = e.metadata().ok().and_then(|m| m.modified().ok());
            if touched.is_some_and(|t| t > since) {
                if let Some(stem) = path.file_stem() {
                    ids.insert(stem.to_string_lossy().into_owned());
                }
            }
        }
        Ok(ids.into_iter().collect())
    }

    fn record(&self, id: &str) -> Result<(), MemoryError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| MemoryError::io(format!("creating {}", self.dir.display()), e))?;
        let stamp = chrono::Utc::now().to_rfc3339();
        std::fs::write(self.file_of(id), format!("{id}\n{stamp}\n"))
            .map_err(|e| MemoryError::io("writing the session record", e))
    }
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
