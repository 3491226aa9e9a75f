//! [`MemoryPath`]: a validated memory address, shared by the store trait and the change feed.

use crate::safety::validate_rel_path;
use crate::types::MemoryError;

/// A memory's address inside its store: relative, `/`-separated, ending in `.md`, never
/// `MEMORY.md`, with no `..`, no absolute path, no NUL and no leading `.` segment.
///
/// Only [`MemoryPath::new`] builds one, and it runs the memory crate's validation
/// ([`validate_rel_path`]), so a backend primitive that takes a `MemoryPath` cannot receive an
/// unvalidated path.
///
/// ```
/// use memloop_memory::store::MemoryPath;
/// assert_eq!(MemoryPath::new("team/grafana.md")?.as_str(), "team/grafana.md");
/// assert!(MemoryPath::new("../escape.md").is_err());
/// assert!(MemoryPath::new("/etc/passwd.md").is_err());
/// assert!(MemoryPath::new("MEMORY.md").is_err());
/// # Ok::<(), memloop_memory::store::MemoryError>(())
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
pub(crate) fn file_stem(rel: &str) -> &str {
    rel.rsplit('/')
        .next()
        .unwrap_or(rel)
        .trim_end_matches(".md")
}
