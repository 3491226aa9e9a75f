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

/// The owner a memory dir records, if any: the first line of its [`OWNER_FILE`].
pub(crate) fn recorded_owner(dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dir.join(OWNER_FILE)).ok()?;
    let line = text.lines().next()?.trim_end_matches('\r');
    (!line.is_empty()).then(|| PathBuf::from(line))
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

/// Why a memory dir cannot be recorded as `owner`'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OwnerError {
    /// Another project owns it.
    /// (Its text names the dir, never the other project: the log does.)
    #[error(
        "its memory dir {dir} already holds the memory of another project (its recorded owner, \
         in {OWNER_FILE} there, is another path): the server keeps one project per memory \
         dir; give one of them its own memory dir (`memory_dir` in its \
         `.memloop/settings.local.json`)"
    )]
    Taken {
        /// The memory dir.
        dir: String,
        /// The recorded owner (for the log).
        other: String,
    },
    /// The record could not be written.
    #[error("cannot record the owner of the memory dir {dir}: {why}")]
    Io {
        /// The memory dir.
        dir: String,
        /// What failed.
        why: String,
    },
}

/// Record `owner` as the owner of `dir` (created if missing), unless it records one already:
/// `Ok` when `owner` is (or now is) the owner, [`OwnerError::Taken`] when another project is.
/// The record appears whole or not at all: it is written and synced under a name of its own,
/// then linked into place, which fails if a record exists. Of two first writers one wins and
/// the other reads the winner's whole record (the same owner: `Ok`; another: refused).
pub(crate) fn record_owner(dir: &Path, owner: &Path) -> Result<(), OwnerError> {
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
            Some(other) if other == owner => Ok(()),
            other => Err(OwnerError::Taken {
                dir: dir.display().to_string(),
                other: other.map_or_else(
                    || format!("an unreadable {OWNER_FILE}"),
                    |o| o.display().to_string(),
                ),
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
        assert_eq!(recorded_owner(&dir), Some(PathBuf::from("/srv/团队/app")));
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
}
