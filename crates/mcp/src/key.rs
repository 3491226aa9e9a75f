//! Which memory a project path names: the key the memory is stored under, and every project path
//! that maps to that key.
//!
//! Authorization is decided on this key, never on the path a client sent: two paths that map to
//! one key reach one memory, so a grant covers a key only if it covers every path that maps to
//! it ([`Access::permit`](crate::Access::permit)). The key is computed once per request, by the
//! one function that also tells the store where to read and write
//! ([`Projects::resolve`](crate::projects) for the memory dir, [`ProjectStores::key`] for a
//! shared store).
//!
//! On the memory dir the key is the dir itself. Claude Code's slug of a path is lossy (`a/b`,
//! `a-b` and `a_b` share one), so the server records the canonical owner of each dir it writes
//! in the dir ([`OWNER_FILE`]) and refuses a second owner: once recorded, only the owner's paths
//! map to the dir.
//!
//! [`ProjectStores::key`]: crate::ProjectStores::key

use std::io::Write;
use std::path::{Path, PathBuf};

/// The file in a memory dir that records its owner: the canonical path of the project (its git
/// root, or the directory itself outside git) the server serves from that dir, on one line.
pub const OWNER_FILE: &str = ".memloop-owner";

/// The key a project's memory is stored under, and which project paths map to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryKey {
    /// The store's name for the memory: the memory dir's path, or the team project id.
    pub id: String,
    /// Every project path that maps to this key.
    pub reach: Reach,
}

/// Which project paths map to a [`MemoryKey`]. A grant covers the key only if it covers all of
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Exactly this canonical directory.
    Dir(PathBuf),
    /// This canonical directory and every directory under it: a git repository's root, whose
    /// subdirectories (and linked worktrees) share its memory.
    Tree(PathBuf),
    /// Every checkout of this git origin (credentials removed), wherever it lies: no path glob
    /// covers it, only a grant naming the origin (`origin:URL`) or the project id.
    Origin(String),
    /// Any project path: one memory dir for every project (`--memory-dir`, `MEMLOOP_MEMORY_DIR`,
    /// user or managed settings), a memory dir whose owner is not recorded while other paths
    /// share its name, or a store that does not say ([`ProjectStores::key`]'s default). Only a
    /// grant for every project covers it.
    ///
    /// [`ProjectStores::key`]: crate::ProjectStores::key
    Anyone,
}

/// Whether `dir`'s owner record lets `owner` in, as it is now: `Ok(true)` when it names
/// `owner`, `Ok(false)` when there is none, [`OwnerError::Taken`] when it names another project
/// or cannot be trusted (see [`recorded_owner`]). The one reading of the record that every
/// decision (resolving a request, opening a dir to read, claiming it to write) makes.
pub(crate) fn check_owner(dir: &Path, owner: &Path) -> Result<bool, OwnerError> {
    let other = match recorded_owner(dir) {
        Ok(Some(recorded)) if recorded == owner => return Ok(true),
        Ok(None) => return Ok(false),
        Ok(Some(other)) => other.display().to_string(),
        Err(why) => why,
    };
    Err(OwnerError::Taken {
        dir: dir.display().to_string(),
        other,
    })
}

/// Whether `dir` holds nothing anyone wrote: it does not exist, or has no entry but hidden ones
/// (lock files, the server's own records).
pub(crate) fn holds_nothing(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .all(|e| e.file_name().to_string_lossy().starts_with('.')),
        Err(_) => !dir.exists(),
    }
}

/// Why a memory dir cannot be recorded as `owner`'s. Its text never names the dir or another
/// project (refusals reach clients that must not learn where a memory dir is); the log does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OwnerError {
    /// Another project owns it.
    #[error(
        "its memory dir already holds the memory of another project (its recorded owner, in \
         {OWNER_FILE} there, is another path): the server keeps one project per memory dir; \
         give one of them its own memory dir (`memory_dir` in its \
         `.memloop/settings.local.json`)"
    )]
    Taken {
        /// The memory dir (for the log).
        dir: String,
        /// The recorded owner (for the log).
        other: String,
    },
    /// It records no owner but holds memories (written before owners were recorded, or by
    /// the CLI): only a token for every project may claim it.
    #[error(
        "its memory dir holds memories of a project it records no owner for: only a token for \
         every project may write there first (which records this project as its owner)"
    )]
    Unowned {
        /// The memory dir (for the log).
        dir: String,
    },
    /// The record could not be read or written.
    #[error("cannot record the owner of its memory dir (the server's log says why)")]
    Io {
        /// The memory dir (for the log).
        dir: String,
        /// What failed (for the log).
        why: String,
    },
}

impl OwnerError {
    /// Log what the client is not told: the dir, the other owner, the I/O error.
    pub(crate) fn log(&self, project: &Path) {
        match self {
            Self::Taken { dir, other } => tracing::info!(
                project = %project.display(), dir = %dir, owner = %other,
                "memory dir owned by another project"
            ),
            Self::Unowned { dir } => tracing::info!(
                project = %project.display(), dir = %dir,
                "memory dir holds memories with no recorded owner"
            ),
            Self::Io { dir, why } => tracing::warn!(
                project = %project.display(), dir = %dir, error = %why,
                "memory dir owner not recorded"
            ),
        }
    }
}

/// Claim `dir` (created if missing) for `owner` before a write: the one decision of who owns a
/// memory dir, made before any byte of a write lands there. `Ok` when `owner` is (or now is) the
/// recorded owner. The record is written once and never changed ([`record_owner`]), so a write
/// that claimed the dir may go on: no other project can take it in between.
///
/// - another recorded owner: [`OwnerError::Taken`];
/// - no record, but the dir holds memories: recorded only when `adopt` (the request's token
///   covers every project), else [`OwnerError::Unowned`];
/// - no record and nothing in the dir: recorded as `owner`'s (of two first writers, one wins
///   and the other is refused).
pub(crate) fn claim_owner(dir: &Path, owner: &Path, adopt: bool) -> Result<(), OwnerError> {
    let shown = || dir.display().to_string();
    std::fs::create_dir_all(dir).map_err(|e| OwnerError::Io {
        dir: shown(),
        why: e.to_string(),
    })?;
    if check_owner(dir, owner)? {
        return Ok(());
    }
    if !adopt && !holds_nothing(dir) {
        return Err(OwnerError::Unowned { dir: shown() });
    }
    record_owner(dir, owner)
}

/// The owner `dir` records: `Ok(None)` when there is no record, `Err` (why, for the log) when
/// the record is there but not a readable regular file (a link, a directory, a pipe,
/// unreadable text): memloop never follows a link for its own files.
pub(crate) fn recorded_owner(dir: &Path) -> Result<Option<PathBuf>, String> {
    let read = || -> std::io::Result<Vec<u8>> {
        let file = memloop_files::open_internal_file(
            dir,
            OWNER_FILE,
            std::fs::OpenOptions::new().read(true),
        )?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_OWNER_BYTES + 1),
            &mut bytes,
        )?;
        Ok(bytes)
    };
    let bytes = match read() {
        Ok(bytes) if bytes.len() as u64 > MAX_OWNER_BYTES => {
            return Err(format!("{OWNER_FILE} is larger than any owner record"));
        }
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let text = String::from_utf8(bytes).map_err(|_| format!("{OWNER_FILE} is not UTF-8"))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(format!("{OWNER_FILE} is empty"));
    }
    Ok(Some(PathBuf::from(line)))
}

/// The most bytes of an owner record read (a canonical path on one line).
const MAX_OWNER_BYTES: u64 = 64 * 1024;

/// Record `owner` as the owner of `dir` (created if missing), unless it records one already:
/// `Ok` when `owner` is (or now is) the owner, [`OwnerError::Taken`] when another project is.
/// The record appears whole or not at all: it is written and synced under a name of its own,
/// then linked into place, which fails if a record (or anything else of that name) exists. Of
/// two first writers one wins and the other reads the winner's whole record (the same owner:
/// `Ok`; another: refused).
fn record_owner(dir: &Path, owner: &Path) -> Result<(), OwnerError> {
    let io = |e: std::io::Error| OwnerError::Io {
        dir: dir.display().to_string(),
        why: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut staged = tempfile::Builder::new()
        .prefix(".memloop-owner.")
        .tempfile_in(dir)
        .map_err(io)?;
    staged
        .write_all(format!("{}\n", owner.display()).as_bytes())
        .map_err(io)?;
    staged.as_file().sync_all().map_err(io)?;
    match std::fs::hard_link(staged.path(), dir.join(OWNER_FILE)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match recorded_owner(dir) {
            Ok(Some(other)) if other == owner => Ok(()),
            other => Err(OwnerError::Taken {
                dir: dir.display().to_string(),
                other: match other {
                    Ok(Some(o)) => o.display().to_string(),
                    Ok(None) => format!("a {OWNER_FILE} that went away"),
                    Err(why) => why,
                },
            }),
        },
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_first_owner_wins_and_a_second_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("mem");
        assert!(holds_nothing(&dir));
        record_owner(&dir, Path::new("/srv/团队/app")).unwrap();
        assert!(holds_nothing(&dir), "the record alone is not memory");
        assert_eq!(
            recorded_owner(&dir),
            Ok(Some(PathBuf::from("/srv/团队/app")))
        );
        record_owner(&dir, Path::new("/srv/团队/app")).unwrap();
        let taken = record_owner(&dir, Path::new("/srv/团队-app")).unwrap_err();
        assert!(matches!(taken, OwnerError::Taken { .. }), "{taken}");
        std::fs::write(dir.join("MEMORY.md"), "- [x](x.md) — x\n").unwrap();
        assert!(!holds_nothing(&dir));
    }

    #[test]
    fn first_writers_racing_for_one_dir_never_see_a_half_written_record() {
        // Many writers of one project create the dir's record at once (as 20 server
        // processes do): each must read the winner's whole record and be let in.
        let tmp = tempfile::tempdir().unwrap();
        for round in 0..20 {
            let dir = tmp.path().join(format!("mem-{round}"));
            let start = std::sync::Arc::new(std::sync::Barrier::new(8));
            let writers: Vec<_> = (0..8)
                .map(|_| {
                    let (dir, start) = (dir.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        record_owner(&dir, Path::new("/srv/проект/app"))
                    })
                })
                .collect();
            for w in writers {
                assert_eq!(w.join().unwrap(), Ok(()));
            }
            let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
            assert_eq!(left.len(), 1, "staged records left behind");
        }
    }

    #[test]
    fn a_claim_is_decided_once_and_only_a_token_for_everything_adopts_a_dir_with_memories() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("mem");
        let (a, b) = (Path::new("/srv/équipe/app"), Path::new("/srv/équipe-app"));
        claim_owner(&dir, a, false).unwrap();
        claim_owner(&dir, a, false).unwrap();
        for adopt in [false, true] {
            let taken = claim_owner(&dir, b, adopt).unwrap_err();
            assert!(matches!(taken, OwnerError::Taken { .. }), "{taken}");
            assert!(!taken.to_string().contains("/srv"), "{taken}");
            assert!(!taken.to_string().contains(&*tmp.path().to_string_lossy()));
        }
        // Memories written with no owner recorded (the CLI, older servers).
        let legacy = tmp.path().join("legacy");
        std::fs::create_dir_all(&legacy).unwrap();
        std::fs::write(legacy.join("MEMORY.md"), "- [x](x.md) — x\n").unwrap();
        let unowned = claim_owner(&legacy, a, false).unwrap_err();
        assert!(matches!(unowned, OwnerError::Unowned { .. }), "{unowned}");
        assert_eq!(recorded_owner(&legacy), Ok(None));
        claim_owner(&legacy, a, true).unwrap();
        assert_eq!(recorded_owner(&legacy), Ok(Some(a.to_path_buf())));
    }

    #[cfg(unix)]
    #[test]
    fn an_owner_record_that_is_a_link_or_no_file_is_never_followed_nor_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let me = Path::new("/srv/проект/app");
        // A record elsewhere naming this very owner: a link to it grants nothing.
        let planted = tmp.path().join("planted");
        std::fs::write(&planted, format!("{}\n", me.display())).unwrap();
        let linked = tmp.path().join("linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(&planted, linked.join(OWNER_FILE)).unwrap();
        assert!(recorded_owner(&linked).is_err());
        assert!(claim_owner(&linked, me, true).is_err());
        // A dangling link: the claim's link into place fails, and the record is not trusted.
        let dangling = tmp.path().join("dangling");
        std::fs::create_dir_all(&dangling).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("nowhere"), dangling.join(OWNER_FILE)).unwrap();
        assert!(claim_owner(&dangling, me, true).is_err());
        assert!(
            !tmp.path().join("nowhere").exists(),
            "the link was followed"
        );
        // A directory, an empty record, a huge one.
        let odd = tmp.path().join("odd");
        std::fs::create_dir_all(odd.join(OWNER_FILE)).unwrap();
        assert!(claim_owner(&odd, me, true).is_err());
        let empty = tmp.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        std::fs::write(empty.join(OWNER_FILE), "").unwrap();
        assert!(claim_owner(&empty, me, true).is_err());
        let huge = tmp.path().join("huge");
        std::fs::create_dir_all(&huge).unwrap();
        let mut text = format!("{}\n", me.display());
        text.push_str(&"x".repeat(MAX_OWNER_BYTES as usize));
        std::fs::write(huge.join(OWNER_FILE), text).unwrap();
        assert!(claim_owner(&huge, me, true).is_err());
    }
}
