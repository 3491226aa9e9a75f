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
///
/// The records dir and its files are memloop's own files in the memory dir: the dir must be a
/// real directory ([`memloop_files::internal_dir`]; a link there is refused, nothing is written
/// or listed through it), a record is written to a temp file in it and renamed into place (so a
/// link planted where a record belongs is replaced, never written through), and only regular
/// files count when the records are listed.
#[derive(Debug, Clone)]
pub struct SessionRecords {
    /// The memory dir holding [`SESSIONS_DIR`].
    base: PathBuf,
    dir: PathBuf,
}

/// The error of a session record operation: it names the records dir relative to the memory
/// dir, never the memory dir's path.
fn records_error(what: &str, e: std::io::Error) -> MemoryError {
    MemoryError::io(format!("{what} `{SESSIONS_DIR}`"), e)
}

impl SessionRecords {
    /// Records in `<memory_dir>/.sessions/`.
    pub fn for_memory_dir(memory_dir: &Path) -> Self {
        Self {
            base: memory_dir.to_path_buf(),
            dir: memory_dir.join(SESSIONS_DIR),
        }
    }

    /// The records dir, created when missing; a link or anything else there is refused.
    fn open_dir(&self) -> std::io::Result<PathBuf> {
        memloop_files::internal_dir(&self.base, SESSIONS_DIR)
    }

    /// The records dir when it exists (nothing is created), checked like [`Self::open_dir`].
    fn existing_dir(&self) -> std::io::Result<Option<PathBuf>> {
        memloop_files::existing_internal_dir(&self.base, SESSIONS_DIR)
    }

    /// The record file of session `id`: the id itself when it is a plain name (letters, digits,
    /// `-`, `_`, at most 128 characters), else a hash of it.
    fn file_of(&self, id: &str) -> PathBuf {
        self.dir.join(Self::name_of(id))
    }

    /// The record file name of session `id` (see [`Self::file_of`]).
    fn name_of(id: &str) -> String {
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
        format!("{name}.session")
    }
}

impl SessionSource for SessionRecords {
    fn touched_since(&self, since: SystemTime, current: &str) -> Result<Vec<String>, MemoryError> {
        let listing = |e| records_error("listing session records in", e);
        let Some(dir) = self.existing_dir().map_err(listing)? else {
            return Ok(Vec::new());
        };
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(listing(e)),
        };
        let current = self.file_of(current);
        let mut ids = BTreeSet::new();
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            if path == current || path.extension().is_none_or(|x| x != "session") {
                continue;
            }
            // Only regular files are records (the entry's own type: a link is not followed).
            if !e.file_type().is_ok_and(|t| t.is_file()) {
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
        let dir = self.open_dir().map_err(|e| records_error("opening", e))?;
        let writing = |e| records_error("writing a session record in", e);
        let stamp = chrono::Utc::now().to_rfc3339();
        // A temp file in the checked dir, renamed into place: the rename replaces whatever is
        // at the record's name (a link too) instead of following it.
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&dir)
            .map_err(writing)?;
        std::io::Write::write_all(&mut tmp, format!("{id}\n{stamp}\n").as_bytes())
            .map_err(writing)?;
        tmp.persist(dir.join(Self::name_of(id)))
            .map_err(|e| writing(e.error))?;
        Ok(())
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

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const VICTIM_TEXT: &str = "Ünïcödé жертва 受害者: not memloop's";

    /// Every file of `dir` with its bytes, sorted by name.
    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_sessions_dir_that_is_a_link_is_neither_written_nor_listed_through() {
        let mem = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        std::fs::write(victim.path().join("a.session"), VICTIM_TEXT).unwrap();
        symlink(victim.path(), mem.path().join(SESSIONS_DIR)).unwrap();
        let records = SessionRecords::for_memory_dir(mem.path());

        for id in ["b", "сессия-1", "会话"] {
            let msg = records.record(id).unwrap_err().to_string();
            assert!(
                msg.contains("`.sessions` in the memory dir is a symbolic link"),
                "{msg}"
            );
            assert!(!msg.contains(&*mem.path().to_string_lossy()), "{msg}");
        }
        let msg = records
            .touched_since(SystemTime::UNIX_EPOCH, "current")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`.sessions`"), "{msg}");
        assert!(!msg.contains(&*mem.path().to_string_lossy()), "{msg}");
        assert_eq!(
            files(victim.path()),
            vec![("a.session".to_owned(), VICTIM_TEXT.as_bytes().to_vec())]
        );
    }

    #[test]
    fn only_regular_records_count_and_a_link_at_a_record_is_replaced_not_written_through() {
        let mem = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        let target = victim.path().join("target.txt");
        std::fs::write(&target, VICTIM_TEXT).unwrap();
        let records = SessionRecords::for_memory_dir(mem.path());
        records.record("s1").unwrap();
        let dir = mem.path().join(SESSIONS_DIR);
        symlink(&target, dir.join("planted.session")).unwrap();
        symlink(&target, dir.join("s2.session")).unwrap();
        std::fs::create_dir(dir.join("d.session")).unwrap();

        assert_eq!(
            records
                .touched_since(SystemTime::UNIX_EPOCH, "current")
                .unwrap(),
            vec!["s1".to_owned()]
        );
        records.record("s2").unwrap();
        assert!(
            std::fs::symlink_metadata(dir.join("s2.session"))
                .unwrap()
                .file_type()
                .is_file()
        );
        assert!(
            std::fs::read_to_string(dir.join("s2.session"))
                .unwrap()
                .starts_with("s2\n")
        );
        records.record("сессия-1").unwrap();
        let touched = records
            .touched_since(SystemTime::UNIX_EPOCH, "current")
            .unwrap();
        assert_eq!(touched.len(), 3, "{touched:?}");
        assert!(touched.contains(&"s2".to_owned()), "{touched:?}");
        assert!(!touched.contains(&"planted".to_owned()), "{touched:?}");
        assert_eq!(
            files(victim.path()),
            vec![("target.txt".to_owned(), VICTIM_TEXT.as_bytes().to_vec())]
        );
    }
}
