//! The [`MemoryStore`] trait: everything the rest of memloop needs from a memory store, and the
//! one enforcing entry point every write goes through.
//!
//! The embedded default is the memory dir (`memloop-files`: Markdown files plus a `MEMORY.md` index, in Claude
//! Code's format). Other backends implement the same trait; selectors, recall, extraction and the
//! memory tools only see `Arc<dyn MemoryStore>`.

use crate::changes::{ChangeCursor, Changes};
pub use crate::memory_path::MemoryPath;
use crate::team::MemoryScope;
use crate::types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, WriteMode,
    WriteReport,
};
use async_trait::async_trait;
use memloop_secrets::SecretFilter;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The limits the write entry point enforces before a backend sees a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteLimits {
    /// Largest memory one write may store, measured the same way for every write: the bytes
    /// of the memory file's whole text (frontmatter and body, as rendered or as given raw).
    /// 1 MiB by default, the same as the file store's `StoreConfig::max_read_bytes`, so a
    /// memory written in one piece is read back whole. A bigger one is refused with
    /// [`MemoryError::TooLarge`].
    pub max_text_bytes: usize,
}

impl Default for WriteLimits {
    fn default() -> Self {
        Self {
            max_text_bytes: 1024 * 1024,
        }
    }
}

/// A write that passed every rule: the path is a valid [`MemoryPath`] (so never `MEMORY.md`),
/// the title and description hold no control character but whitespace and the body no NUL,
/// no field of the doc looks like a credential ([`SecretFilter`]), the memory file's whole
/// text (frontmatter and body) is within [`WriteLimits::max_text_bytes`], and a `user` memory is not written into team memory
/// (`team/…`, see [`MemoryScope`](crate::MemoryScope)). Only [`CheckedWrite::check`] builds one, so a backend's
/// [`MemoryStore::write_checked`] cannot be handed a write that skipped them.
#[derive(Debug)]
pub struct CheckedWrite {
    path: MemoryPath,
    doc: MemoryDoc,
    mode: WriteMode,
    raw: Option<String>,
}

impl CheckedWrite {
    /// Apply the rules to a write. This is the single place they run: `dyn MemoryStore::write`
    /// calls it, and so does any backend-specific writer (e.g. the team sync's versioned push).
    pub fn check(
        rel_path: &str,
        doc: &MemoryDoc,
        mode: WriteMode,
        limits: WriteLimits,
    ) -> Result<Self, MemoryError> {
        let path = MemoryPath::new(rel_path)?;
        check_text(doc)?;
        for part in [&doc.name, &doc.description, &doc.body] {
            SecretFilter::check(part)?;
        }
        crate::team::check_team_write(path.as_str(), doc)?;
        within_limit(&path, crate::frontmatter::render_memory(doc).len(), limits)?;
        Ok(Self {
            path,
            doc: doc.clone(),
            mode,
            raw: None,
        })
    }

    /// Apply the rules to a write of a memory file exactly as written (`text`, e.g. a file a
    /// teammate's machine holds, unknown frontmatter keys and comments included): valid path,
    /// never `MEMORY.md`, the text must be a memory file ([`MemoryDoc::parse`]), no credential
    /// anywhere in the *whole* text (so also not in a key memloop does not know), the whole
    /// text within [`WriteLimits::max_text_bytes`], and a `user` memory not written into team
    /// memory: the same rules as [`check`](Self::check). The write replaces the file
    /// ([`WriteMode::Overwrite`]); [`raw`](Self::raw) is the text to store and [`doc`](Self::doc)
    /// its parsed fields.
    pub fn check_raw(rel_path: &str, text: &str, limits: WriteLimits) -> Result<Self, MemoryError> {
        let path = MemoryPath::new(rel_path)?;
        SecretFilter::check(text)?;
        within_limit(&path, text.len(), limits)?;
        let stem = crate::memory_path::file_stem(rel_path);
        let doc = MemoryDoc::parse(text, stem).map_err(|reason| MemoryError::Unreadable {
            path: path.as_str().to_owned(),
            reason: format!("not a memory file: {reason}"),
        })?;
        check_text(&doc)?;
        if text.contains('\0') {
            return Err(MemoryError::InvalidName {
                name: path.as_str().to_owned(),
                reason: "the memory's text contains a NUL character (U+0000); remove it".into(),
            });
        }
        crate::team::check_team_write(path.as_str(), &doc)?;
        Ok(Self {
            path,
            doc,
            mode: WriteMode::Overwrite,
            raw: Some(text.to_owned()),
        })
    }

    /// Where to write.
    pub fn path(&self) -> &MemoryPath {
        &self.path
    }

    /// What to write.
    pub fn doc(&self) -> &MemoryDoc {
        &self.doc
    }

    /// Replace or append.
    pub fn mode(&self) -> WriteMode {
        self.mode
    }

    /// The file text to store as is, for a write built by [`check_raw`](Self::check_raw)
    /// (`None`: the backend renders [`doc`](Self::doc)). A backend that keeps file text stores
    /// these bytes; one that only keeps fields stores `doc`.
    pub fn raw(&self) -> Option<&str> {
        self.raw.as_deref()
    }
}

/// The text rule of [`CheckedWrite`], the same for every backend: a title (`name`) and a
/// description are one line of text, so neither holds a control character other than whitespace
/// (tab, line feed, ... are written as one space; NUL, BEL, ESC, DEL and the C1 controls are
/// refused: they would reach `MEMORY.md` raw, drive a terminal, or be refused by a database),
/// and a body holds no NUL (no database text column stores it, and a file with one reads as
/// binary). Refused with [`MemoryError::InvalidName`], the text shown escaped.
fn check_text(doc: &MemoryDoc) -> Result<(), MemoryError> {
    for (field, text) in [("title", &doc.name), ("description", &doc.description)] {
        if let Some(c) = text.chars().find(|c| c.is_control() && !c.is_whitespace()) {
            return Err(MemoryError::InvalidName {
                name: crate::names::shown_name(text),
                reason: format!(
                    "the {field} contains the control character U+{:04X}; a {field} is one line \
                     of printable text: remove it",
                    u32::from(c)
                ),
            });
        }
    }
    if doc.body.contains('\0') {
        return Err(MemoryError::InvalidName {
            name: crate::names::shown_name(&doc.name),
            reason: "the body contains a NUL character (U+0000); remove it".into(),
        });
    }
    Ok(())
}

/// The size rule of [`CheckedWrite`]: `bytes` of memory text within the limit.
fn within_limit(path: &MemoryPath, bytes: usize, limits: WriteLimits) -> Result<(), MemoryError> {
    if bytes > limits.max_text_bytes {
        return Err(MemoryError::TooLarge {
            path: path.as_str().to_owned(),
            bytes,
            limit: limits.max_text_bytes,
        });
    }
    Ok(())
}

/// The version of a memory: the SHA-256 (lowercase hex) of its text as the store holds it
/// ([`MemoryFile::raw`] of a read). The same rule on every backend, so a client compares
/// versions without knowing which backend it talks to.
///
/// ```
/// use memloop_store::content_version;
/// assert_eq!(content_version("").len(), 64);
/// assert_ne!(content_version("決定"), content_version("决定"));
/// ```
pub fn content_version(raw: &str) -> String {
    Sha256::digest(raw.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a conditional write ([`MemoryStore::write_checked_if`]) expects to find at its path.
///
/// A version here is a content version ([`content_version`]: the SHA-256 of the text a read
/// returns), the one version every backend can report. A backend that counts versions of its
/// own maps onto it in one place: `memloop_pg::Expected::from_content` turns a content version
/// into the PostgreSQL row version (an `i64`) of the row whose hash it is, and refuses any other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectedVersion {
    /// Whatever is there (last writer wins); the write still reports the version it made.
    Any,
    /// No memory (create only).
    Absent,
    /// Exactly this version ([`content_version`] of the text the caller read).
    Is(String),
}

impl ExpectedVersion {
    /// Whether a memory whose current version is `current` (`None`: absent) satisfies it.
    pub fn accepts(&self, current: Option<&str>) -> bool {
        match (self, current) {
            (Self::Any, _) | (Self::Absent, None) => true,
            (Self::Is(v), Some(c)) => v.eq_ignore_ascii_case(c),
            _ => false,
        }
    }

    /// The conflict error for a memory at `path` whose current version is `current`.
    pub fn conflict(&self, path: &str, current: Option<&str>) -> MemoryError {
        MemoryError::VersionConflict {
            path: path.to_owned(),
            expected: match self {
                Self::Is(v) => v.clone(),
                Self::Absent => "none".into(),
                Self::Any => "any".into(),
            },
            current: current.unwrap_or("none").to_owned(),
        }
    }
}

/// What a conditional write did: the usual report and the memory's new version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedWrite {
    /// Where it was written.
    pub report: WriteReport,
    /// The memory's version after the write ([`content_version`] of its stored text).
    pub version: String,
}

/// Where a store keeps its memories.
///
/// Non-exhaustive: a match outside this crate needs a `_` arm, so a kind of location added
/// later breaks no backend or host. Only [`Directory`](Self::Directory) is a directory
/// ([`StoreDescription::dir`]); every other kind keeps no memory file a tool could name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreLocation {
    /// A memory dir on local disk (absolute, canonical).
    Directory(PathBuf),
    /// A database.
    Database {
        /// The engine (`postgres`).
        engine: String,
        /// The connection URL with any password replaced by `***`.
        url: String,
        /// The project whose memories this store serves.
        project: String,
    },
    /// A store in this process's memory (a map, an embedded engine with no file): its memories
    /// go when the process ends. [`StoreDescription::memory`] builds the description.
    Memory {
        /// The store's name, unique per instance in this process (e.g. `map-3`): two stores
        /// with the same name would share their identity, their caches and their locks.
        name: String,
    },
    /// A remote memory service reached over the network (HTTP, gRPC).
    /// [`StoreDescription::remote`] builds the description with the URL's credentials removed.
    Remote {
        /// The service (`mem0`, `acme-memory`), as the backend names it.
        service: String,
        /// The endpoint, without credentials: no `user:password@`, and the value of any query
        /// parameter whose name says it is a secret (`token`, `key`, `password`, ...) is `***`.
        url: String,
        /// The project (or namespace, collection) whose memories this store serves.
        project: String,
    },
}

/// What a store is: where it keeps its memories, and a stable identity (two stores over the
/// same memories have the same identity; it is usable as a cache key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreDescription {
    /// Where the memories are.
    pub location: StoreLocation,
    /// A stable identity string (`dir:/abs/path`, `postgres:host/db?schema=..#project`).
    pub identity: String,
}

impl StoreDescription {
    /// A directory store at `dir`.
    pub fn directory(dir: &Path) -> Self {
        Self {
            location: StoreLocation::Directory(dir.to_path_buf()),
            identity: format!("dir:{}", dir.display()),
        }
    }

    /// An in-process store named `name` ([`StoreLocation::Memory`]), identity `memory:<name>`.
    /// The name must be unique per instance in the process (a counter, a UUID): the identity
    /// keys the store's caches and local dirs, so two maps must not share it.
    ///
    /// ```
    /// use memloop_store::StoreDescription;
    /// let map = StoreDescription::memory("map-3");
    /// assert_eq!(map.identity, "memory:map-3");
    /// assert_eq!(map.to_string(), "in-memory store `map-3`");
    /// assert_eq!(map.dir(), None);
    /// ```
    pub fn memory(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            identity: format!("memory:{name}"),
            location: StoreLocation::Memory { name },
        }
    }

    /// A remote memory service ([`StoreLocation::Remote`]) at `url` serving `project`, identity
    /// `<service>:<url>#<project>`. The URL is kept without its credentials (no
    /// `user:password@`; secret-named query parameters `***`), so neither the description nor
    /// the identity, which are logged and shown, ever holds one.
    ///
    /// ```
    /// use memloop_store::StoreDescription;
    /// let remote = StoreDescription::remote(
    ///     "mem0",
    ///     "https://alice:s3cret@api.example.com/v1?api_key=sk-123&region=eu",
    ///     "web",
    /// );
    /// assert_eq!(remote.identity, "mem0:https://api.example.com/v1?api_key=***&region=eu#web");
    /// assert_eq!(
    ///     remote.to_string(),
    ///     "mem0 service https://api.example.com/v1?api_key=***&region=eu, project `web`"
    /// );
    /// assert_eq!(remote.dir(), None);
    /// ```
    pub fn remote(service: impl Into<String>, url: &str, project: impl Into<String>) -> Self {
        let (service, url, project) =
            (service.into(), url_without_credentials(url), project.into());
        Self {
            identity: format!("{service}:{url}#{project}"),
            location: StoreLocation::Remote {
                service,
                url,
                project,
            },
        }
    }

    /// The memory dir, when the store is a directory.
    pub fn dir(&self) -> Option<&Path> {
        match &self.location {
            StoreLocation::Directory(d) => Some(d),
            StoreLocation::Database { .. }
            | StoreLocation::Memory { .. }
            | StoreLocation::Remote { .. } => None,
        }
    }

    /// A short hex digest of the identity (16 characters), for directory names.
    pub fn identity_hash(&self) -> String {
        let digest = Sha256::digest(self.identity.as_bytes());
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Display for StoreDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.location {
            StoreLocation::Directory(d) => write!(f, "{}", d.display()),
            StoreLocation::Database {
                engine,
                url,
                project,
            } => write!(f, "{engine} database {url}, project `{project}`"),
            StoreLocation::Memory { name } => write!(f, "in-memory store `{name}`"),
            StoreLocation::Remote {
                service,
                url,
                project,
            } => write!(f, "{service} service {url}, project `{project}`"),
        }
    }
}

/// Query parameter names (lowercase fragments) whose values are credentials.
const SECRET_PARAMS: [&str; 8] = [
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "auth",
    "signature",
    "credential",
];

/// `url` without its credentials: the `user:password@` of its authority dropped, and the value
/// of every query parameter whose name holds a [`SECRET_PARAMS`] fragment (any case) replaced
/// by `***`. Text that is not a URL is kept as it is.
fn url_without_credentials(url: &str) -> String {
    let bare = match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    };
    let Some((base, query)) = bare.split_once('?') else {
        return bare;
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _))
                if SECRET_PARAMS
                    .iter()
                    .any(|s| name.to_lowercase().contains(s)) =>
            {
                format!("{name}=***")
            }
            _ => param.to_owned(),
        })
        .collect();
    let mut out = format!("{base}?{}", params.join("&"));
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// Why something needs local disk, for [`MemoryStore::local_dir`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LocalPurpose {
    /// The semantic-recall vector cache (one file per embedding model).
    VectorCache,
    /// Cross-process locks (the consolidation lock).
    Locks,
    /// Per-session records the consolidation gate counts.
    SessionRecords,
    /// Session transcripts the consolidation reads.
    Transcripts,
    /// Work that must survive a restart (the MCP server's pending background summaries).
    PendingWork,
    /// Per-session notes compaction summarises with, and the full text of tool outputs cut
    /// during compaction (one dir per session under the one given).
    SessionNotes,
}

/// The answer to [`MemoryStore::local_dir`]. A directory is the base the consumer lays its own
/// files out in (the consolidation lock file, the `.sessions/` dir, one vector file per model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalDir {
    /// A real directory on this machine (it may not exist yet; the user creates it).
    Dir(PathBuf),
    /// This backend keeps it elsewhere (or not at all); the reason says where or why.
    Elsewhere(String),
}

/// Where a store with no directory of its own keeps what needs local disk, keyed by the store's
/// identity: the vector cache under `<cache>/memloop/vectors/<identity hash>/`, locks, session
/// records, session notes and pending work under `<state>/memloop/stores/<identity hash>/`; transcripts are
/// not such a store's to keep. `<cache>` is `XDG_CACHE_HOME` (else `$HOME/.cache`), `<state>`
/// is `XDG_STATE_HOME` (else `$HOME/.local/state`; `USERPROFILE` stands for `HOME` where that
/// is unset), read from the environment it is built from;
/// a relative value is ignored, as the XDG rules say.
///
/// ```
/// use memloop_host::env::EnvVars;
/// use memloop_store::{LocalBases, LocalDir, LocalPurpose, StoreDescription, StoreLocation};
///
/// let bases = LocalBases::from_env(&EnvVars::from_pairs([("HOME", "/home/ann")]));
/// let store = StoreDescription {
///     identity: "postgres:db/team#web".into(),
///     location: StoreLocation::Database {
///         engine: "postgres".into(),
///         url: "postgres://db/team".into(),
///         project: "web".into(),
///     },
/// };
/// let LocalDir::Dir(dir) = bases.local_dir(&store, LocalPurpose::VectorCache) else {
///     panic!("HOME is set")
/// };
/// assert!(dir.starts_with("/home/ann/.cache/memloop/vectors"));
/// assert!(matches!(bases.local_dir(&store, LocalPurpose::Transcripts), LocalDir::Elsewhere(_)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalBases {
    cache: Option<PathBuf>,
    state: Option<PathBuf>,
}

impl LocalBases {
    /// The bases `env` names (`XDG_CACHE_HOME`, `XDG_STATE_HOME`, `HOME`).
    pub fn from_env(env: &memloop_host::env::EnvVars) -> Self {
        let absolute = |key: &str| env.get(key).map(PathBuf::from).filter(|p| p.is_absolute());
        let home = env.home_dir().filter(|p| p.is_absolute());
        Self {
            cache: absolute("XDG_CACHE_HOME").or_else(|| home.as_ref().map(|h| h.join(".cache"))),
            state: absolute("XDG_STATE_HOME")
                .or_else(|| home.as_ref().map(|h| h.join(".local/state"))),
        }
    }

    /// The local dir for `purpose` of the store `description` describes.
    pub fn local_dir(&self, description: &StoreDescription, purpose: LocalPurpose) -> LocalDir {
        let hash = description.identity_hash();
        let (base, sub) = match purpose {
            LocalPurpose::VectorCache => (&self.cache, "vectors"),
            LocalPurpose::Locks
            | LocalPurpose::SessionRecords
            | LocalPurpose::PendingWork
            | LocalPurpose::SessionNotes => (&self.state, "stores"),
            LocalPurpose::Transcripts => {
                return LocalDir::Elsewhere(format!(
                    "{description} keeps no session transcripts on this machine"
                ));
            }
        };
        match base {
            Some(base) => LocalDir::Dir(base.join("memloop").join(sub).join(hash)),
            None => LocalDir::Elsewhere(format!(
                "no local dir for {description}: neither XDG_CACHE_HOME / XDG_STATE_HOME nor HOME is set"
            )),
        }
    }
}

/// A project's memories. Object-safe; share it as `Arc<dyn MemoryStore>`.
///
/// Contract:
/// - memories are addressed by [`MemoryPath`]s (relative, validated); a store says what it is
///   with [`describe`](Self::describe) and never pretends to be a path;
/// - a backend implements primitives ([`read_path`](Self::read_path),
///   [`write_checked_if`](Self::write_checked_if), [`delete_checked`](Self::delete_checked), ...);
///   everything else calls the entry points on `dyn MemoryStore`: `write`,
///   `delete`, `read`. The write entry point applies every rule
///   (path, `MEMORY.md`, secrets, size) before the backend sees the write, so a backend cannot
///   forget them: [`write_checked_if`](Self::write_checked_if) takes a [`CheckedWrite`], which
///   only [`CheckedWrite::check`] builds;
/// - whatever needs local disk asks [`local_dir`](Self::local_dir) for it, by purpose.
///
/// # The rules every store keeps
///
/// Each rule names the check of the conformance suite (`memloop_store::conformance`, feature
/// `conformance`) that verifies it; a backend that breaks a rule fails that check, with the
/// check's name in brackets at the start of the reason (`[scan order] ...`). The per-method
/// docs below refine them.
///
/// 1. **Round trip** (`round_trip`): a memory written is read back with the same title,
///    description, type and body; a read of a memory never written, or deleted, is
///    [`MemoryError::NotFound`]; a read after a write returns the new text, never a stale one.
/// 2. **Scan** (`scan_order`): [`scan`](Self::scan) lists every memory exactly once, never an
///    index file (`MEMORY.md` at any depth), never a deleted memory, newest first by `mtime`;
///    memories with the same `mtime` in ascending byte order of their paths. Each header
///    carries the title, description and type a read of that memory returns. It never fails
///    because of one bad file: text that is not valid UTF-8 is read lossily and binary or
///    unreadable files are skipped, each with a `tracing` warning.
/// 3. **Mtimes** (`mtimes`): a write that changes a memory's text gives it an `mtime` later than
///    its previous one (never earlier than any other memory's at that moment), so a rewritten
///    memory moves to the front of the scan; a write that leaves the text as it was may keep it.
/// 4. **Paths are identities** (`path_identity`): two paths are the same memory only when they
///    are the same bytes: no case folding (`A.md` and `a.md` are two memories), no Unicode
///    normalisation (the NFC and NFD forms of `é` are two memories), and a read, a scan and
///    the index give the path back byte for byte.
/// 5. **Refused input** (`names_and_paths`, `hostile_input`, `secrets`, `size_limit`): invalid
///    paths, credentials, control characters, NUL and oversized texts are refused with nothing
///    stored and the memory already there unchanged (the write entry point runs these rules;
///    the store owns leaving no trace); a memory of exactly the size limit is read back whole.
/// 6. **Write modes** (`write_modes`, `round_trip`): [`WriteMode::Overwrite`] replaces the
///    memory; [`WriteMode::Append`] keeps the old body and puts the new one after it;
///    [`WriteMode::ReplaceBody`] replaces only the body and keeps the stored frontmatter as
///    written (unknown keys, comments): the stored title, description and type stay unless the
///    doc sets them ([`replace_body`](crate::replace_body) builds the text, from the text the
///    store holds); on a missing memory both `Append` and `ReplaceBody` write as `Overwrite`
///    does. A raw write (`write_raw_if`) is stored byte for byte or as its canonical text
///    ([`canonical_memory_text`](crate::canonical_memory_text)) (`versions`).
/// 7. **Versions** (`versions`, `round_trip`): a memory's version is the [`content_version`]
///    of the text a read returns; every write reports that version of the text it left and
///    `created` exactly when no memory was there; a conditional write
///    ([`ExpectedVersion::Absent`], [`ExpectedVersion::Is`]) that finds another version writes
///    nothing and is [`MemoryError::VersionConflict`] naming the current version;
///    [`ExpectedVersion::Any`] always writes.
/// 8. **Atomic conditional writes** (`concurrent_writers`): the version check and the write
///    are one step against every other writer, whatever the backend's await points: of
///    writers racing with the same expectation exactly one wins. There is no default
///    [`write_checked_if`](Self::write_checked_if): a read, a compare and a write with anything
///    in between is a race, so every backend implements the step itself (a lock held across
///    both, a transaction, a row version).
/// 9. **Batches** (`batches`): [`write_checked_batch`](Self::write_checked_batch) writes all of
///    its memories or none: one conflict leaves every memory of the batch as it was.
/// 10. **The index** (`memory_index`, `index_caps`): every memory but a daily log has exactly one
///     entry, its title then its description, updated by a rewrite and removed by a delete;
///     entries are listed in the order their memories were first written (a rewrite keeps its
///     place). [`index_entries`](Self::index_entries) lists them all, uncapped;
///     [`load_index`](Self::load_index) is the private index with the session-load caps of
///     [`IndexCaps::default`](crate::IndexCaps) (200 lines, 25,000 bytes, then the warning
///     line: [`load_capped`](crate::load_capped)).
/// 11. **Daily logs** (`daily_logs`): a memory under `logs/` ([`is_daily_log`](crate::is_daily_log),
///     [`LOGS_DIR`](crate::LOGS_DIR): `logs/YYYY/MM/YYYY-MM-DD.md`) is stored, scanned and read like
///     any other but gets no index entry in either index.
/// 12. **Team memory** (`team_rule`): a `user` memory is never written into `team/…`; a team
///     memory is listed by scan and [`index_entries`](Self::index_entries) under its `team/`
///     path, and loaded at session start exactly once: in the team index
///     ([`load_scope_index`](Self::load_scope_index)`(Team)`, links relative to `team/`) when
///     the store keeps one, else in the private index, never in both.
/// 13. **Missing memories** (`missing_memories`): reading, deleting or renaming a memory that
///     does not exist is [`MemoryError::NotFound`] (a delete of a missing memory is not a
///     success); a rename onto an existing memory is refused and changes nothing; a rename
///     moves the text and the index entry, and the old path is gone.
/// 14. **Deletes are precise** (`delete_precision`): a delete removes exactly its memory and its
///     index entry: not a path it is a prefix of (`a.md` vs `a.md.md`, `ab.md`), not the same
///     name in `team/` or another folder, not an index neighbour.
/// 15. **Clear** (`clear`): [`clear`](Self::clear) deletes every memory (team memories and daily
///     logs included) and both indexes, and returns the paths it deleted.
/// 16. **The change feed** (`change_feed`, `cursor_identity`): [`changes`](Self::changes) never
///     answers "unchanged" ([`Changes::Unchanged`]) after a change: every kind of change (a create,
///     rewrite, append, replace-body, delete, rename, clear and batch) is reported as written or
///     removed, or a rescan is asked for. A cursor the store did not issue (another store's, or
///     bytes it cannot read) gets [`Changes::Rescan`]. A store without a feed answers every
///     question with `Rescan { cursor: None }`.
///
/// A third backend implements the required methods and gets the write rules for free; the
/// recipe is in `docs/ARCHITECTURE.md` ("Add a memory backend"), and the smallest complete
/// backend is the test kit's in-memory `MapStore` (`memloop-testkit`, feature `store`). The
/// suite's own power is proved in `crates/store/tests/broken_backends.rs`: a reference backend
/// passes it, and each of many planted bugs fails a named check.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// What this store is (a directory, a database project, ...) and its stable identity.
    fn describe(&self) -> StoreDescription;

    /// A local directory for `purpose`, or why this backend keeps it elsewhere. The default
    /// keys dirs by the store's identity under the process environment's [`LocalBases`]; a
    /// backend that is given an environment (as `memloop-pg`'s config is) overrides this with
    /// [`LocalBases::local_dir`] over its own.
    fn local_dir(&self, purpose: LocalPurpose) -> LocalDir {
        LocalBases::from_env(&memloop_host::env::EnvVars::from_process())
            .local_dir(&self.describe(), purpose)
    }

    /// The limits the write entry point enforces (1 MiB bodies by default).
    fn write_limits(&self) -> WriteLimits {
        WriteLimits::default()
    }

    /// The heap memory the store itself holds, in bytes, counted as [`crate::heap`] counts:
    /// what it keeps per memory (e.g. the versions it last saw) and its own settings, not a
    /// pool or files it shares. A server that keeps stores open under a memory budget adds it
    /// to their caches' estimates. The default, for a store that keeps nothing that grows,
    /// says 0.
    fn approx_bytes(&self) -> usize {
        0
    }

    /// What changed since `since` (the change feed, [`crate::Changes`]): a cache calls
    /// this each turn instead of [`scan`](Self::scan). The default has no feed and always asks
    /// for a rescan, which is correct for any backend.
    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        let _ = since;
        Ok(Changes::Rescan { cursor: None })
    }

    /// Headers of all memories (never `MEMORY.md`), newest first by mtime, ties in path order
    /// (rule 2).
    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError>;

    /// Read one memory (primitive: callers use `read`).
    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError>;

    /// Read several memories: one result per path, in the order given, each what
    /// [`read_path`](Self::read_path) returns for it (a missing memory is
    /// [`MemoryError::NotFound`], the others still read). What an index reads when it takes in
    /// many memories at once. The default runs `read_path` for each, 16 at a time; a backend
    /// that can read many in one round trip (a database) overrides it.
    async fn read_paths(&self, paths: &[MemoryPath]) -> Vec<Result<MemoryFile, MemoryError>> {
        use futures::StreamExt;
        let reads: Vec<_> = paths.iter().map(|p| self.read_path(p)).collect();
        futures::stream::iter(reads).buffered(16).collect().await
    }

    /// Write a memory and its index line (callers use `write`, which builds the
    /// [`CheckedWrite`]): [`write_checked_if`](Self::write_checked_if) expecting any version.
    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        self.write_checked_if(write, &ExpectedVersion::Any)
            .await
            .map(|w| w.report)
    }

    /// Write a memory and its index line only if its current version is what `expected` says
    /// (primitive: callers use `write_if`); otherwise nothing is written and the error is
    /// [`MemoryError::VersionConflict`] naming the current version. Returns the new version.
    ///
    /// The check and the write are one atomic step against every other writer (rule 8): the
    /// file store makes them under its directory lock, the PostgreSQL store on the row's
    /// version, the test kit's `MapStore` under its mutex. There is no default: reading,
    /// comparing and writing with an `.await` in between lets a second writer pass the same
    /// check. A wrapper store forwards this method to the store it wraps.
    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError>;

    /// Write several memories, each at the version it expects, whole or not at all (each
    /// write passed the rules: a [`CheckedWrite`]); returns each one's new version, in order.
    /// A conflict is [`MemoryError::VersionConflict`] naming the memory, and nothing is left
    /// written.
    ///
    /// The default writes them one by one ([`write_checked_if`](Self::write_checked_if)) and,
    /// when one fails, puts back those already written (the previous text written again, a
    /// new memory deleted): whole against a failing write, not against a process killed
    /// midway. The file store overrides it with a journal that the next open finishes, so its
    /// batches are whole through a crash too.
    async fn write_checked_batch(
        &self,
        writes: Vec<(CheckedWrite, ExpectedVersion)>,
    ) -> Result<Vec<VersionedWrite>, MemoryError> {
        let mut done: Vec<(MemoryPath, Option<String>, String)> = Vec::new();
        let mut written = Vec::with_capacity(writes.len());
        for (write, expected) in writes {
            let path = write.path().clone();
            let previous = match self.read_path(&path).await {
                Ok(f) => Some(f.raw),
                Err(MemoryError::NotFound(_)) => None,
                Err(e) => return Err(e),
            };
            match self.write_checked_if(write, &expected).await {
                Ok(w) => {
                    done.push((path, previous, w.version.clone()));
                    written.push(w);
                }
                Err(e) => {
                    for (path, previous, version) in done.into_iter().rev() {
                        let ours = ExpectedVersion::Is(version);
                        let limits = self.write_limits();
                        let restored = match previous {
                            Some(text) => {
                                match CheckedWrite::check_raw(path.as_str(), &text, limits) {
                                    Ok(w) => self.write_checked_if(w, &ours).await.map(|_| ()),
                                    Err(e) => Err(e),
                                }
                            }
                            None => self.delete_checked(&path).await,
                        };
                        if let Err(e) = restored {
                            tracing::warn!(rel = path.as_str(), error = %e, "batch write not put back");
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(written)
    }

    /// Delete a memory and its index line (primitive: callers use `delete`).
    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError>;

    /// Move the memory at `from` to `to`'s path (primitive: callers use `rename`, which checks
    /// `from`'s text under the rules at the new path: `to`). Refused when `to` exists, and
    /// nothing changes.
    ///
    /// The default writes `to` (only if absent) and then deletes `from`, deleting `to` again
    /// when that fails: whole against a failing write, not against a process killed between
    /// the two. The file store overrides it with one `rename(2)` under its lock.
    async fn rename_checked(
        &self,
        from: &MemoryPath,
        to: CheckedWrite,
    ) -> Result<WriteReport, MemoryError> {
        let to_path = to.path().clone();
        let written = self.write_checked_if(to, &ExpectedVersion::Absent).await?;
        if let Err(e) = self.delete_checked(from).await {
            let ours = ExpectedVersion::Is(written.version);
            if let Err(undo) = self.delete_checked(&to_path).await {
                tracing::warn!(rel = to_path.as_str(), error = %undo, ?ours, "renamed copy not removed");
            }
            return Err(e);
        }
        Ok(written.report)
    }

    /// Delete every memory and the index itself (`memloop memory clear`). Returns the relative
    /// paths of the memories deleted. Index lines that name no valid memory file are dropped
    /// with the index.
    async fn clear(&self) -> Result<Vec<String>, MemoryError>;

    /// `MEMORY.md` with the session-load caps applied (200 lines / 25,000 bytes + warning).
    async fn load_index(&self) -> Result<LoadedIndex, MemoryError>;

    /// The parsed index entries (all of them, no caps; a store that keeps a team index lists
    /// its entries too, as store paths: `team/…`).
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError>;

    /// The index of one scope, with the session-load caps: the private index is
    /// [`load_index`](Self::load_index); the team index is the one a store keeps for its
    /// `team/` memories (the file store: `team/MEMORY.md`, entry links relative to `team/`). The
    /// default keeps no team index: an empty one.
    async fn load_scope_index(&self, scope: MemoryScope) -> Result<LoadedIndex, MemoryError> {
        match scope {
            MemoryScope::Private => self.load_index().await,
            MemoryScope::Team => Ok(LoadedIndex::default()),
        }
    }

    /// The containment question for a memory path a tool names (`rel`, relative): `Ok` when it
    /// is a valid memory path of this store. The default validates it ([`MemoryPath::new`]); the
    /// file store also resolves symlinks so a link cannot lead out of the memory dir. A
    /// question, not a refusal: implementations log nothing here.
    fn check_contained(&self, rel: &str) -> Result<MemoryPath, MemoryError> {
        MemoryPath::new(rel)
    }
}

impl dyn MemoryStore + '_ {
    /// Write a memory and its index line: the one enforcing entry point. The rules run here
    /// ([`CheckedWrite::check`]: valid path, never `MEMORY.md`, no credential, the whole file
    /// text within [`write_limits`](MemoryStore::write_limits)) and then the store's containment question;
    /// only a write that passes reaches the backend.
    pub async fn write(
        &self,
        rel_path: &str,
        doc: &MemoryDoc,
        mode: WriteMode,
    ) -> Result<WriteReport, MemoryError> {
        let checked = CheckedWrite::check(rel_path, doc, mode, self.write_limits())
            .and_then(|w| self.check_contained(w.path().as_str()).map(|_| w))
            .inspect_err(|e| tracing::warn!(rel_path, error = %e, "memory write refused"))?;
        self.write_checked(checked).await
    }

    /// `write` only if the memory is at the `expected` version
    /// ([`MemoryStore::write_checked_if`]): the same rules first, then one atomic check-and-write.
    /// A stale expectation is [`MemoryError::VersionConflict`] with the current version.
    pub async fn write_if(
        &self,
        rel_path: &str,
        doc: &MemoryDoc,
        mode: WriteMode,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let checked = CheckedWrite::check(rel_path, doc, mode, self.write_limits())
            .and_then(|w| self.check_contained(w.path().as_str()).map(|_| w))
            .inspect_err(|e| tracing::warn!(rel_path, error = %e, "memory write refused"))?;
        self.write_checked_if(checked, expected).await
    }

    /// Write a memory file exactly as written (unknown frontmatter keys, comments and the body
    /// byte for byte) and its index line, through the same rules as `write`
    /// ([`CheckedWrite::check_raw`]: the secret filter runs on the whole text) and the
    /// containment question, only if the memory is at the `expected` version.
    pub async fn write_raw_if(
        &self,
        rel_path: &str,
        text: &str,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let checked = CheckedWrite::check_raw(rel_path, text, self.write_limits())
            .and_then(|w| self.check_contained(w.path().as_str()).map(|_| w))
            .inspect_err(|e| tracing::warn!(rel_path, error = %e, "memory write refused"))?;
        self.write_checked_if(checked, expected).await
    }

    /// Move the memory at `from` to `to`: the text at `from` must pass the rules at `to`
    /// ([`CheckedWrite::check_raw`]: a `user` memory cannot move into `team/`, a file that would
    /// be refused there is not moved), both paths contained; `to` must not exist. One step on
    /// the file store ([`MemoryStore::rename_checked`]).
    pub async fn rename(&self, from: &str, to: &str) -> Result<WriteReport, MemoryError> {
        let from_path = self.check_contained(from)?;
        let text = self.read_path(&from_path).await?.raw;
        let checked = CheckedWrite::check_raw(to, &text, self.write_limits())
            .and_then(|w| self.check_contained(w.path().as_str()).map(|_| w))
            .inspect_err(|e| tracing::warn!(from, to, error = %e, "memory rename refused"))?;
        self.rename_checked(&from_path, checked).await
    }

    /// Delete a memory and its index line (path validated, never `MEMORY.md`, contained).
    pub async fn delete(&self, rel_path: &str) -> Result<(), MemoryError> {
        let path = self
            .check_contained(rel_path)
            .inspect_err(|e| tracing::warn!(rel_path, error = %e, "memory delete refused"))?;
        self.delete_checked(&path).await
    }

    /// Read one memory (path validated and contained).
    pub async fn read(&self, rel_path: &str) -> Result<MemoryFile, MemoryError> {
        let path = self.check_contained(rel_path)?;
        self.read_path(&path).await
    }

    /// Read several memories: one result per path, in order, each what `read`
    /// returns for it; the paths that pass the checks are read together
    /// ([`read_paths`](MemoryStore::read_paths): one round trip on a database).
    pub async fn read_many(&self, rel_paths: &[&str]) -> Vec<Result<MemoryFile, MemoryError>> {
        let mut checked = Vec::with_capacity(rel_paths.len());
        let mut paths = Vec::new();
        for rel in rel_paths {
            match self.check_contained(rel) {
                Ok(p) => {
                    paths.push(p);
                    checked.push(None);
                }
                Err(e) => checked.push(Some(Err(e))),
            }
        }
        let mut read = self.read_paths(&paths).await.into_iter();
        checked
            .into_iter()
            .zip(rel_paths)
            .map(|(refused, rel)| {
                refused.unwrap_or_else(|| {
                    // A backend that answers fewer paths than asked: the rest were not read.
                    read.next()
                        .unwrap_or_else(|| Err(MemoryError::NotFound((*rel).to_owned())))
                })
            })
            .collect()
    }

    /// How a memory is named where a tool reports a written file or a path is shown to the
    /// model: the absolute file for a directory store, else the memory path itself (relative).
    pub fn target_path(&self, path: &MemoryPath) -> PathBuf {
        match self.describe().location {
            StoreLocation::Directory(root) => root.join(path.as_str()),
            StoreLocation::Database { .. }
            | StoreLocation::Memory { .. }
            | StoreLocation::Remote { .. } => PathBuf::from(path.as_str()),
        }
    }

    /// The local dir this store gives for `purpose`; when it keeps that elsewhere, a
    /// per-identity dir under the system temp dir, with a warning (for consumers that cannot run
    /// without one: the consolidation lock, the vector cache).
    pub fn local_dir_or_temp(&self, purpose: LocalPurpose) -> PathBuf {
        match self.local_dir(purpose) {
            LocalDir::Dir(d) => d,
            LocalDir::Elsewhere(why) => {
                let d = std::env::temp_dir()
                    .join("memloop")
                    .join("stores")
                    .join(self.describe().identity_hash());
                tracing::warn!(?purpose, reason = %why, dir = %d.display(), "no local dir; using a temp dir");
                d
            }
        }
    }

    /// A tool's write target for the memory `rel`: [`check_contained`](MemoryStore::check_contained),
    /// then `target_path`.
    pub fn write_target(&self, rel: &str) -> Result<PathBuf, MemoryError> {
        Ok(self.target_path(&self.check_contained(rel)?))
    }

    /// The memory path a tool's write target or written file names (`target_path`'s
    /// inverse): for a directory store an absolute path inside the dir (symlinks resolved) or a
    /// path relative to it; for other stores a relative memory path. `Err` when it names no
    /// memory of this store.
    pub fn memory_path_of(&self, target: &Path) -> Result<MemoryPath, MemoryError> {
        let outside = || MemoryError::OutsideMemoryDir {
            path: target.to_path_buf(),
            root: PathBuf::from(self.describe().to_string()),
        };
        let rel = match (self.describe().location, target.is_absolute()) {
            (StoreLocation::Directory(root), true) => {
                dir_relative(&root, target).ok_or_else(outside)?
            }
            (_, true) => return Err(outside()),
            (_, false) => target.to_str().ok_or_else(outside)?.replace('\\', "/"),
        };
        self.check_contained(&rel)
    }
}

/// `path` (absolute) relative to the directory `root`, `/`-separated: lexically, else through
/// the canonical forms of both (a path through a symlinked root maps too).
fn dir_relative(root: &Path, path: &Path) -> Option<String> {
    let strip = |p: &Path, r: &Path| {
        let s = p.strip_prefix(r).ok()?.to_string_lossy().replace('\\', "/");
        (!s.is_empty()).then_some(s)
    };
    let normal = memloop_host::paths::normalize_lexically(path);
    strip(&normal, root).or_else(|| {
        let canonical_root = std::fs::canonicalize(root).ok()?;
        let parent = normal.parent()?;
        let canonical = std::fs::canonicalize(parent)
            .ok()?
            .join(normal.file_name()?);
        strip(&canonical, &canonical_root)
    })
}
