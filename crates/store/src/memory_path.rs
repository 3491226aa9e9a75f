//! [`MemoryPath`]: a validated memory address, shared by the store trait and the change feed.

use crate::names::validate_rel_path;
use crate::types::MemoryError;

/// A memory's address inside its store: relative, `/`-separated, ending in `.md`, never
/// `MEMORY.md`, with no `..`, no absolute path, no NUL and no leading `.` segment.
///
/// Only [`MemoryPath::new`] builds one, and it runs the memory crate's validation
/// ([`validate_rel_path`]), so a backend primitive that takes a `MemoryPath` cannot receive an
/// unvalidated path.
///
/// ```
/// use memloop_store::MemoryPath;
/// assert_eq!(MemoryPath::new("team/grafana.md")?.as_str(), "team/grafana.md");
/// assert!(MemoryPath::new("../escape.md").is_err());
/// assert!(MemoryPath::new("/etc/passwd.md").is_err());
/// assert!(MemoryPath::new("MEMORY.md").is_err());
/// # Ok::<(), memloop_store::MemoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryPath(String);

impl MemoryPath {
    /// Validate `rel` as a memory path.
    pub fn new(rel: &str) -> Result<Self, MemoryError> {
        validate_rel_path(rel).map(|r| Self(r.to_owned()))
    }

    /// The path, `/`-separated.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Display for MemoryPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for MemoryPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The file stem of a relative memory path (`team/deploy.md` → `deploy`): the name of a memory
/// whose frontmatter gives none.
pub fn file_stem(rel: &str) -> &str {
    rel.rsplit('/')
        .next()
        .unwrap_or(rel)
        .trim_end_matches(".md")
}

/// The dir, relative to the memory dir, that holds the daily logs (`logs/YYYY/MM/YYYY-MM-DD.md`).
pub const LOGS_DIR: &str = "logs";

/// Whether a store-relative path is a daily log (`logs/...`). Logs are raw notes: they get no
/// index line and recall does not surface them; the dream distils them into topic files.
///
/// ```
/// assert!(memloop_store::is_daily_log("logs/2026/04/2026-04-09.md"));
/// assert!(!memloop_store::is_daily_log("logs.md"));
/// ```
pub fn is_daily_log(rel: &str) -> bool {
    rel.strip_prefix(LOGS_DIR)
        .is_some_and(|rest| rest.starts_with('/'))
}
