//! [`TeamSync`]: push / pull / status between a local memory dir and the team store.
//!
//! Rules: each entry is compared by the SHA-256 of its canonical text, against the hash and
//! server version recorded at the last sync (`.memloop-team-sync.json` in the local dir), so
//! only changed entries move. Pull: the server's version wins; a local edit to an entry that
//! also changed on the server is reported as a conflict and the local text is kept in a
//! recovery file (`.memloop-team-conflicts/`). Push: an entry that changed on the server since
//! the last sync is not overwritten (conflict: pull first); the write is versioned, so a
//! concurrent push is refused too. Deletions move only with [`SyncOptions::prune`]. Content that
//! looks like a credential never leaves the machine.
//!
//! Files move as written: push sends the local file text (every frontmatter key, comments, the
//! body byte for byte) and the row keeps it; pull writes that text back through the store's
//! checked raw write ([`FileMemoryStore::write_raw_if`]), so keys memloop does not know
//! (`tags:`, a `metadata:` block, an unknown `type`) reach every teammate and survive their
//! edits. The hash compared is that of the canonical text, unknown keys included
//! ([`canonical_text`]), so a formatting-only difference is no change.
//!
//! An entry deleted on the server (a teammate pushed with prune) that was edited here since the
//! last sync is a local change: the edit is newer information than the deletion. Pull leaves it
//! alone, push re-creates it on the server (version 1), and the next pull is in sync.

use crate::content::{canonical_text, sha256_hex};
use crate::error::StoreError;
use crate::store::{Expected, PgMemory, PgMemoryStore};
use memloop_files::FileMemoryStore;
use memloop_secrets::SecretFilter;
use memloop_store::{ExpectedVersion, MemoryError, MemoryStore};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// File in the local dir recording the last sync.
pub const STATE_FILE: &str = ".memloop-team-sync.json";
/// Dir in the local dir holding the local side of conflicts.
pub const CONFLICT_DIR: &str = ".memloop-team-conflicts";

/// Options of a push or pull.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// Propagate deletions (off by default: a deletion is only reported).
    pub prune: bool,
}

/// Where one entry stands relative to the last sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Same on both sides.
    InSync,
    /// Edited or created locally; the server has not changed, or it deleted the entry (a local
    /// edit of an entry deleted on the server is newer information: push re-creates it).
    LocalChanged,
    /// Changed or created on the server; the local copy has not changed.
    ServerChanged,
    /// Changed on both sides since the last sync.
    Conflict,
    /// Deleted locally; the server still has the synced version.
    DeletedLocally,
    /// Deleted on the server; the local copy is the synced version.
    DeletedOnServer,
    /// The local text looks like it holds a credential: it never leaves the machine.
    Secret,
}

/// What a sync did with one entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum SyncAction {
    /// Nothing (in sync, or the other direction's business, or a status report).
    None,
    /// Written to the team store at this version.
    Pushed {
        /// New server version.
        version: i64,
    },
    /// Written to the local dir from this server version.
    Pulled {
        /// Server version.
        version: i64,
    },
    /// Deleted on the server (push with prune).
    DeletedRemote,
    /// Deleted locally (pull with prune).
    DeletedLocal,
    /// A deletion was not propagated (no prune).
    DeletionSkipped,
    /// Conflict: nothing overwritten on the server; on pull the local text was saved here
    /// before the server's version replaced it.
    Conflict {
        /// The recovery file, when one was written.
        recovery: Option<PathBuf>,
        /// Why.
        reason: String,
    },
    /// Refused: the text looks like a credential (pattern named, never the value).
    SecretRefused {
        /// The pattern that matched.
        pattern: String,
    },
    /// The operation failed (message).
    Failed {
        /// Why.
        error: String,
    },
}

/// One entry of a sync report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncItem {
    /// Relative path.
    pub rel_path: String,
    /// Where it stood before this run.
    pub state: EntryState,
    /// What this run did.
    pub action: SyncAction,
}

/// The outcome of a push, pull or status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// Every entry that is not in sync, or that this run touched.
    pub items: Vec<SyncItem>,
}

impl SyncReport {
    /// Entries whose action matches `f`.
    pub fn count(&self, f: impl Fn(&SyncAction) -> bool) -> usize {
        self.items.iter().filter(|i| f(&i.action)).count()
    }

    /// Entries in `state`.
    pub fn in_state(&self, state: EntryState) -> Vec<&str> {
        self.items
            .iter()
            .filter(|i| i.state == state)
            .map(|i| i.rel_path.as_str())
            .collect()
    }

    /// Conflicts reported.
    pub fn conflicts(&self) -> usize {
        self.count(|a| matches!(a, SyncAction::Conflict { .. }))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SyncState {
    project_id: String,
    entries: BTreeMap<String, Base>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Base {
    #[serde(with = "hex32")]
    sha256: [u8; 32],
    version: i64,
}

mod hex32 {
    use serde::{Deserialize, Deserializer, Serializer};
    pub(super) fn serialize<S: Serializer>(v: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let s = String::deserialize(d)?;
        super::from_hex(&s).ok_or_else(|| serde::de::Error::custom("bad sha256"))
    }
}

fn from_hex(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return None;
    }
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The state of the last sync with project `project_id`, from [`STATE_FILE`] in `root`: a
/// fresh state when there is none, it cannot be parsed, or it is another project's. The file
/// is memloop's own: read without following a link, and a link (or anything but a regular
/// file) there fails the sync with an error naming the file relative to the local dir.
fn load_state(root: &Path, project_id: &str) -> Result<SyncState, MemoryError> {
    let fresh = || SyncState {
        project_id: project_id.to_owned(),
        entries: BTreeMap::new(),
    };
    let bytes = match memloop_files::read_internal_file(root, STATE_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(fresh()),
        Err(e) => return Err(MemoryError::io("reading sync state", e)),
    };
    match serde_json::from_slice::<SyncState>(&bytes) {
        Ok(s) if s.project_id == project_id => Ok(s),
        _ => Ok(fresh()),
    }
}

/// Write `state` to [`STATE_FILE`] in `root`: a temp file created there (never through a link,
/// never over an existing file), then renamed into place, which replaces whatever is at the
/// state's name (a link too) instead of following it.
fn save_state(root: &Path, state: &SyncState) -> Result<(), MemoryError> {
    let writing = |e| MemoryError::io("writing sync state", e);
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| MemoryError::io("encoding sync state", std::io::Error::other(e)))?;
    let tmp = format!("{STATE_FILE}.{}.tmp", uuid::Uuid::new_v4());
    let written = memloop_files::open_internal_file(
        root,
        &tmp,
        std::fs::OpenOptions::new().write(true).create_new(true),
    )
    .and_then(|mut f| {
        std::io::Write::write_all(&mut f, text.as_bytes())?;
        f.sync_all()
    })
    .and_then(|()| std::fs::rename(root.join(&tmp), root.join(STATE_FILE)));
    if written.is_err() {
        // The temp file is ours (created new): remove what is left of it.
        let _ = std::fs::remove_file(root.join(&tmp));
    }
    written.map_err(writing)
}

/// Keep `raw`, the local text of the conflicting entry `rel`, in a new recovery file in
/// [`CONFLICT_DIR`] under `root`; returns its path. The dir must be a real directory (a link
/// there is refused: nothing is written through it) and the file is created new, never through
/// a link or over an existing file.
fn save_recovery(root: &Path, rel: &str, raw: &str) -> Result<PathBuf, MemoryError> {
    let dir = memloop_files::internal_dir(root, CONFLICT_DIR)
        .map_err(|e| MemoryError::io(format!("opening the conflict dir `{CONFLICT_DIR}`"), e))?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let name = format!(
        "{}.{stamp}.md",
        rel.replace('/', "__").trim_end_matches(".md")
    );
    let writing = |e| MemoryError::io("writing recovery file", e);
    let mut file = memloop_files::open_internal_file(
        root,
        &format!("{CONFLICT_DIR}/{name}"),
        std::fs::OpenOptions::new().write(true).create_new(true),
    )
    .map_err(writing)?;
    std::io::Write::write_all(&mut file, raw.as_bytes()).map_err(writing)?;
    Ok(dir.join(name))
}

struct Local {
    raw: String,
    sha: [u8; 32],
    secret: Option<&'static str>,
}

/// Called with (entries done, entries in all) while a sync reads and moves entries.
pub type SyncProgress = Arc<dyn Fn(usize, usize) + Send + Sync>;

/// Sync between a local memory dir (or its `team/` subfolder) and a team store.
#[derive(Clone)]
pub struct TeamSync {
    local: FileMemoryStore,
    team: PgMemoryStore,
    progress: Option<SyncProgress>,
}

impl std::fmt::Debug for TeamSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamSync")
            .field("local", &self.local)
            .field("team", &self.team)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Direction {
    Status,
    Push,
    Pull,
}

impl Direction {
    /// The name the `team_sync` span records.
    fn as_str(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Push => "push",
            Self::Pull => "pull",
        }
    }
}

impl TeamSync {
    /// Sync `local` with `team`.
    pub fn new(local: FileMemoryStore, team: PgMemoryStore) -> Self {
        Self {
            local,
            team,
            progress: None,
        }
    }

    /// Report progress to `f` (builder style): (done, total) as local files are read, then as
    /// entries are compared and moved, for a host that shows a progress bar over a large sync.
    pub fn progress(mut self, f: SyncProgress) -> Self {
        self.progress = Some(f);
        self
    }

    fn report_progress(&self, done: usize, total: usize) {
        if let Some(f) = &self.progress {
            f(done, total);
        }
    }

    /// The local dir.
    pub fn local_dir(&self) -> &Path {
        self.local.root()
    }

    /// Where every entry stands; changes nothing.
    pub async fn status(&self) -> Result<SyncReport, StoreError> {
        self.run(Direction::Status, SyncOptions::default()).await
    }

    /// Send local changes to the team store.
    pub async fn push(&self, opts: SyncOptions) -> Result<SyncReport, StoreError> {
        self.run(Direction::Push, opts).await
    }

    /// Bring the team store's changes into the local dir (the server wins; local edits that
    /// conflict are kept in a recovery file).
    pub async fn pull(&self, opts: SyncOptions) -> Result<SyncReport, StoreError> {
        self.run(Direction::Pull, opts).await
    }

    async fn local_entries(&self) -> Result<BTreeMap<String, Local>, MemoryError> {
        let mut out = BTreeMap::new();
        let headers = self.local.scan().await?;
        let total = headers.len();
        for (i, h) in headers.into_iter().enumerate() {
            self.report_progress(i, total);
            let file = match self.local.read(&h.rel_path).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(rel = %h.rel_path, error = %e, "local memory unreadable; not synced");
                    continue;
                }
            };
            let canonical = canonical_text(&file.raw, &h.rel_path);
            let sha = from_hex(&sha256_hex(&canonical)).unwrap_or_default();
            out.insert(
                h.rel_path,
                Local {
                    secret: SecretFilter::find(&file.raw),
                    raw: file.raw,
                    sha,
                },
            );
        }
        Ok(out)
    }

    async fn run(&self, dir: Direction, opts: SyncOptions) -> Result<SyncReport, StoreError> {
        // The sync's span: which way, how many entries it looked at, or why it failed.
        let span = tracing::info_span!(
            "team_sync",
            memloop.sync.direction = dir.as_str(),
            memloop.sync.entries = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let result = tracing::Instrument::instrument(self.run_inner(dir, opts), span.clone()).await;
        match &result {
            Ok(report) => span.record("memloop.sync.entries", report.items.len() as u64),
            Err(_) => span.record("error.type", "team_sync_failed"),
        };
        result
    }

    async fn run_inner(&self, dir: Direction, opts: SyncOptions) -> Result<SyncReport, StoreError> {
        let mut state = load_state(self.local.root(), self.team.project_id())?;
        let local = self.local_entries().await?;
        let server: BTreeMap<String, PgMemory> = self
            .team
            .entries()
            .await?
            .into_iter()
            .map(|m| (m.rel_path.clone(), m))
            .collect();
        let paths: BTreeSet<String> = local
            .keys()
            .chain(server.keys())
            .chain(state.entries.keys())
            .cloned()
            .collect();
        let mut report = SyncReport::default();
        let total = paths.len();
        for (i, rel) in paths.into_iter().enumerate() {
            self.report_progress(i, total);
            let l = local.get(&rel);
            let s = server.get(&rel);
            let s_sha = s.and_then(|m| from_hex(&m.sha256));
            let base = state.entries.get(&rel).copied();
            // Record agreement without moving anything.
            if let (Some(l), Some(s), Some(ss)) = (l, s, s_sha) {
                if l.sha == ss {
                    state.entries.insert(
                        rel.clone(),
                        Base {
                            sha256: ss,
                            version: s.version,
                        },
                    );
                    continue;
                }
            }
            if l.is_none() && s.is_none() {
                state.entries.remove(&rel);
                continue;
            }
            let local_changed = l.map(|l| l.sha) != base.map(|b| b.sha256);
            let server_changed = s.map(|s| s.version) != base.map(|b| b.version);
            let entry_state = match (local_changed, server_changed) {
                (false, false) => continue,
                _ if l.is_some_and(|l| l.secret.is_some()) && local_changed => EntryState::Secret,
                (true, false) if l.is_none() => EntryState::DeletedLocally,
                (true, false) => EntryState::LocalChanged,
                // Deleted on the server, edited here: the edit is the newer information.
                (true, true) if s.is_none() => EntryState::LocalChanged,
                (false, true) if s.is_none() => EntryState::DeletedOnServer,
                (false, true) => EntryState::ServerChanged,
                (true, true) if l.is_none() => EntryState::ServerChanged,
                (true, true) => EntryState::Conflict,
            };
            let action = match dir {
                Direction::Status => SyncAction::None,
                Direction::Push => {
                    let expected = match (s, base) {
                        (None, _) | (_, None) => Expected::Absent,
                        (Some(_), Some(b)) => Expected::Version(b.version),
                    };
                    self.push_one(&rel, entry_state, l, expected, opts, &mut state)
                        .await
                }
                Direction::Pull => {
                    self.pull_one(&rel, entry_state, l, s, base, opts, &mut state)
                        .await
                }
            };
            report.items.push(SyncItem {
                rel_path: rel,
                state: entry_state,
                action,
            });
        }
        self.report_progress(total, total);
        save_state(self.local.root(), &state)?;
        if dir == Direction::Pull {
            self.repair_index(&local).await;
        }
        tracing::info!(
            items = report.items.len(),
            conflicts = report.conflicts(),
            "team memory sync finished"
        );
        Ok(report)
    }

    /// Give every local memory its `MEMORY.md` line: a pull killed between writing a file and
    /// its index line (or a file copied in by hand) leaves one missing, and the next pull puts
    /// it back, so pulls converge. The file is rewritten through the store with the document it
    /// holds, as written (a checked raw write: unknown frontmatter keys stay).
    async fn repair_index(&self, local: &BTreeMap<String, Local>) {
        let indexed: BTreeSet<String> = match self.local.index_entries().await {
            Ok(entries) => entries.into_iter().map(|e| e.file).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "memory index unreadable; not repaired");
                return;
            }
        };
        for rel in local.keys().filter(|r| !indexed.contains(*r)) {
            let repaired = match self.local.read(rel).await {
                Ok(file) => self
                    .local
                    .write_raw_if(rel, &file.raw, &ExpectedVersion::Any)
                    .await
                    .map(|_| ()),
                Err(e) => Err(e),
            };
            match repaired {
                Ok(_) => tracing::info!(rel = %rel, "memory index line restored"),
                Err(e) => tracing::warn!(rel = %rel, error = %e, "memory index line not restored"),
            }
        }
    }

    async fn push_one(
        &self,
        rel: &str,
        st: EntryState,
        l: Option<&Local>,
        expected: Expected,
        opts: SyncOptions,
        state: &mut SyncState,
    ) -> SyncAction {
        match (st, l) {
            (EntryState::Secret, Some(l)) => SyncAction::SecretRefused {
                pattern: l.secret.unwrap_or_default().to_owned(),
            },
            (EntryState::LocalChanged, Some(l)) => {
                match self.team.write_versioned_raw(rel, &l.raw, expected).await {
                    Ok(w) => {
                        if let Some(sha) = from_hex(&w.sha256) {
                            state.entries.insert(
                                rel.to_owned(),
                                Base {
                                    sha256: sha,
                                    version: w.version,
                                },
                            );
                        }
                        SyncAction::Pushed { version: w.version }
                    }
                    Err(e) if e.as_conflict().is_some() => SyncAction::Conflict {
                        recovery: None,
                        reason: format!("{e}; pull first"),
                    },
                    Err(StoreError::Memory(MemoryError::SensitiveData { pattern })) => {
                        SyncAction::SecretRefused { pattern }
                    }
                    Err(e) => SyncAction::Failed {
                        error: e.to_string(),
                    },
                }
            }
            (EntryState::DeletedLocally, _) if opts.prune => {
                match self.team.delete_versioned(rel, expected).await {
                    Ok(()) => {
                        state.entries.remove(rel);
                        SyncAction::DeletedRemote
                    }
                    Err(e) if e.as_conflict().is_some() => SyncAction::Conflict {
                        recovery: None,
                        reason: format!("{e}; pull first"),
                    },
                    Err(e) => SyncAction::Failed {
                        error: e.to_string(),
                    },
                }
            }
            (EntryState::DeletedLocally, _) => SyncAction::DeletionSkipped,
            (EntryState::Conflict, _) => SyncAction::Conflict {
                recovery: None,
                reason: "changed locally and on the server since the last sync; pull first".into(),
            },
            _ => SyncAction::None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn pull_one(
        &self,
        rel: &str,
        st: EntryState,
        l: Option<&Local>,
        s: Option<&PgMemory>,
        base: Option<Base>,
        opts: SyncOptions,
        state: &mut SyncState,
    ) -> SyncAction {
        let write_local = |m: &PgMemory| {
            let (local, m) = (self.local.clone(), m.clone());
            async move {
                local
                    .write_raw_if(&m.rel_path, &m.source, &ExpectedVersion::Any)
                    .await
                    .map(|_| m)
            }
        };
        match (st, s) {
            (EntryState::ServerChanged, Some(m)) => match write_local(m).await {
                Ok(m) => {
                    if let Some(sha) = from_hex(&m.sha256) {
                        state.entries.insert(
                            rel.to_owned(),
                            Base {
                                sha256: sha,
                                version: m.version,
                            },
                        );
                    }
                    SyncAction::Pulled { version: m.version }
                }
                Err(e) => SyncAction::Failed {
                    error: e.to_string(),
                },
            },
            (EntryState::Conflict | EntryState::Secret, Some(m))
                if base.map(|b| b.version) != Some(m.version) =>
            {
                let recovery = match l
                    .map(|l| save_recovery(self.local.root(), rel, &l.raw))
                    .transpose()
                {
                    Ok(r) => r,
                    Err(e) => {
                        return SyncAction::Failed {
                            error: e.to_string(),
                        };
                    }
                };
                match write_local(m).await {
                    Ok(m) => {
                        if let Some(sha) = from_hex(&m.sha256) {
                            state.entries.insert(
                                rel.to_owned(),
                                Base {
                                    sha256: sha,
                                    version: m.version,
                                },
                            );
                        }
                        SyncAction::Conflict {
                            recovery,
                            reason: "changed locally and on the server; the server's version won, the local text is in the recovery file".into(),
                        }
                    }
                    Err(e) => SyncAction::Failed {
                        error: e.to_string(),
                    },
                }
            }
            (EntryState::DeletedOnServer, None) if opts.prune => match self.local.delete(rel).await
            {
                Ok(()) | Err(MemoryError::NotFound(_)) => {
                    state.entries.remove(rel);
                    SyncAction::DeletedLocal
                }
                Err(e) => SyncAction::Failed {
                    error: e.to_string(),
                },
            },
            (EntryState::DeletedOnServer, None) => SyncAction::DeletionSkipped,
            _ => SyncAction::None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PROJECT: &str = "проект-项目";

    fn state_with(rel: &str) -> SyncState {
        SyncState {
            project_id: PROJECT.to_owned(),
            entries: BTreeMap::from([(
                rel.to_owned(),
                Base {
                    sha256: [7; 32],
                    version: 3,
                },
            )]),
        }
    }

    /// Every file of `dir` with its bytes, sorted by name (its users plant symbolic links).
    #[cfg(unix)]
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
    fn sync_state_and_recovery_files_round_trip() {
        let root = tempfile::tempdir().unwrap();
        assert!(load_state(root.path(), PROJECT).unwrap().entries.is_empty());
        save_state(root.path(), &state_with("notes/заметка.md")).unwrap();
        let state = load_state(root.path(), PROJECT).unwrap();
        assert_eq!(state.entries["notes/заметка.md"].version, 3);
        // Another project's state is no state.
        assert!(load_state(root.path(), "other").unwrap().entries.is_empty());
        let path = save_recovery(root.path(), "team/café.md", "Ünïcödé 文本 текст").unwrap();
        assert!(path.starts_with(root.path().join(CONFLICT_DIR)));
        assert_eq!(std::fs::read_to_string(path).unwrap(), "Ünïcödé 文本 текст");
        // Only the state and the conflict dir: no temp file is left behind.
        let names: Vec<String> = files_and_dirs(root.path());
        assert_eq!(names, vec![CONFLICT_DIR.to_owned(), STATE_FILE.to_owned()]);
    }

    fn files_and_dirs(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[cfg(unix)]
    #[test]
    fn a_link_where_the_sync_state_belongs_is_refused_not_read_and_not_written_through() {
        let root = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        let victim_text = serde_json::to_vec(&state_with("секрет/秘密.md")).unwrap();
        std::fs::write(victim.path().join("state.json"), &victim_text).unwrap();
        std::os::unix::fs::symlink(
            victim.path().join("state.json"),
            root.path().join(STATE_FILE),
        )
        .unwrap();

        let msg = load_state(root.path(), PROJECT).unwrap_err().to_string();
        assert!(
            msg.contains("`.memloop-team-sync.json` in the memory dir is a symbolic link"),
            "{msg}"
        );
        assert!(!msg.contains(&*root.path().to_string_lossy()), "{msg}");
        // Saving replaces the link itself; its target is untouched.
        save_state(root.path(), &state_with("notes/note.md")).unwrap();
        assert!(
            std::fs::symlink_metadata(root.path().join(STATE_FILE))
                .unwrap()
                .file_type()
                .is_file()
        );
        assert!(
            load_state(root.path(), PROJECT)
                .unwrap()
                .entries
                .contains_key("notes/note.md")
        );
        assert_eq!(
            files(victim.path()),
            vec![("state.json".to_owned(), victim_text)]
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_conflict_dir_that_is_a_link_is_refused_and_nothing_is_written_through_it() {
        let root = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        std::fs::write(victim.path().join("keep.md"), "Ünïcödé жертва 受害者").unwrap();
        std::os::unix::fs::symlink(victim.path(), root.path().join(CONFLICT_DIR)).unwrap();

        let msg = save_recovery(root.path(), "team/заметка.md", "local text")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("`.memloop-team-conflicts` in the memory dir is a symbolic link"),
            "{msg}"
        );
        assert!(!msg.contains(&*root.path().to_string_lossy()), "{msg}");
        assert_eq!(
            files(victim.path()),
            vec![(
                "keep.md".to_owned(),
                "Ünïcödé жертва 受害者".as_bytes().to_vec()
            )]
        );
    }
}
