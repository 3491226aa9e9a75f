//! The memory vocabulary shared by the store, selectors, recall and extraction.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::SystemTime;

/// The closed set of memory types. Parsing is an exact lowercase match;
/// anything else is "no type".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryType {
    /// Who the user is: role, expertise, preferences about themselves.
    User,
    /// How the user wants the agent to work: corrections and confirmations.
    Feedback,
    /// Project context that is not in the code: deadlines, reasons behind decisions.
    Project,
    /// Pointers to external systems (dashboards, tickets, docs).
    Reference,
}

impl MemoryType {
    /// All four, in canonical order.
    pub const ALL: [MemoryType; 4] = [Self::User, Self::Feedback, Self::Project, Self::Reference];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Feedback => "feedback",
            Self::Project => "project",
            Self::Reference => "reference",
        }
    }

    /// Exact lowercase match; `None` for anything else.
    ///
    /// ```
    /// use memloop_store::MemoryType;
    /// assert_eq!(MemoryType::parse("feedback"), Some(MemoryType::Feedback));
    /// assert_eq!(MemoryType::parse("Feedback"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MemoryType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            format!("unknown memory type `{s}` (expected user, feedback, project or reference)")
        })
    }
}

/// What the scan knows about one memory file without reading its body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryHeader {
    /// Path relative to the memory dir, `/`-separated (e.g. `feedback/testing.md`).
    pub rel_path: String,
    /// `name` from the frontmatter.
    pub name: Option<String>,
    /// `description` from the frontmatter: what selectors match against.
    pub description: Option<String>,
    /// `type` from the frontmatter.
    pub memory_type: Option<MemoryType>,
    /// Last modification time.
    pub mtime: SystemTime,
}

/// A memory file's parsed content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFile {
    /// Header (path, frontmatter fields, mtime).
    pub header: MemoryHeader,
    /// The body after the frontmatter.
    pub body: String,
    /// The whole file text as stored.
    pub raw: String,
}

/// A memory to write: frontmatter fields and body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryDoc {
    /// Short title.
    pub name: String,
    /// One specific line (what selectors match against).
    pub description: String,
    /// Type, if any.
    pub memory_type: Option<MemoryType>,
    /// Body text.
    pub body: String,
}

impl MemoryDoc {
    /// A memory with all four fields.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        memory_type: impl Into<Option<MemoryType>>,
        body: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            memory_type: memory_type.into(),
            body: body.into(),
        }
    }
}

/// How a memory write (`dyn MemoryStore::write`) combines with an existing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// Replace the file.
    #[default]
    Overwrite,
    /// Append the body to the existing body (frontmatter of the new doc wins if non-empty).
    Append,
    /// Replace the body and keep the existing file's frontmatter as written (comments, list
    /// formatting, key order, unknown keys), the doc's fields set in it in place
    /// ([`replace_body`](crate::replace_body)); a missing memory is written as `Overwrite`
    /// writes it. Every store builds the new text with that one function, from the text its
    /// writer stored.
    #[serde(rename = "replace_body")]
    ReplaceBody,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// Relative path written.
    pub rel_path: String,
    /// What was written, as tools report it: the absolute file for a directory store, the
    /// memory path (relative) for other stores.
    pub path: PathBuf,
    /// Whether the file was new.
    pub created: bool,
}

/// One line of `MEMORY.md`: `- [Title](file.md) — one-line hook`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// Link text.
    pub title: String,
    /// Relative path of the memory file.
    pub file: String,
    /// The hook after the dash (may be empty).
    pub hook: String,
}

/// `MEMORY.md` as loaded into a session (line and byte caps applied).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadedIndex {
    /// The text to inject (truncated, with the warning line when a cap fired).
    pub content: String,
    /// Whether the 200-line cap fired.
    pub truncated_by_lines: bool,
    /// Whether the 25,000-byte cap fired.
    pub truncated_by_bytes: bool,
    /// Lines in the file before truncation (when the store read only the index's start and
    /// keeps no count of its lines, the lines read: at least the cap when it fired).
    pub original_lines: usize,
    /// Bytes in the file before truncation (when the store read only the index's start, the
    /// bytes read: more than the cap when it fired).
    pub original_bytes: usize,
    /// The warning `content` ends with when a cap fired (`> WARNING: MEMORY.md is …`, naming
    /// the index's size), on its own.
    pub warning: Option<String>,
}

impl LoadedIndex {
    /// `content` without the warning a cap adds: the index lines loaded. Unlike `content`, it
    /// stays the same while the index grows past its caps (the warning names the size).
    ///
    /// ```
    /// use memloop_store::{IndexCaps, load_capped};
    /// let text: String = (0..300).map(|i| format!("- [n{i}](n{i}.md)\n")).collect();
    /// let index = load_capped(&text, IndexCaps::default());
    /// assert_eq!(index.loaded_lines().lines().count(), 200);
    /// assert!(index.content.ends_with(index.warning.as_deref().unwrap_or("none")));
    /// ```
    pub fn loaded_lines(&self) -> &str {
        self.warning
            .as_deref()
            .and_then(|w| self.content.strip_suffix(w)?.strip_suffix("\n\n"))
            .unwrap_or(&self.content)
    }
}

/// Errors of the memory layer. Messages are written for the user (and the model): they say what
/// was wrong and never echo secret values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// Filesystem failure.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A topic/file name a tool passed is not allowed.
    #[error("invalid memory name `{name}`: {reason}")]
    InvalidName {
        /// The name (safe to show: it was typed by the model, not a secret).
        name: String,
        /// Why.
        reason: String,
    },
    /// A write target resolves outside the memory dir.
    #[error("refused: {path} is outside the memory directory {root}")]
    OutsideMemoryDir {
        /// The target.
        path: PathBuf,
        /// The memory dir.
        root: PathBuf,
    },
    /// A configured memory path is invalid (empty, relative, under 3 characters, a drive root,
    /// UNC, NUL, or a `~` form reaching the home dir or above).
    #[error("invalid memory directory `{path}`: {reason}")]
    InvalidMemoryDir {
        /// The configured value.
        path: String,
        /// Why.
        reason: String,
    },
    /// The content looks like a credential.
    #[error(
        "refused to store this memory: it looks like it contains a secret ({pattern}); memories must never hold credentials"
    )]
    SensitiveData {
        /// Name of the pattern that matched (never the secret).
        pattern: String,
    },
    /// A write carries more text than the store's limit (`WriteLimits::max_text_bytes`).
    #[error(
        "refused to store memory `{path}`: its text is {bytes} bytes, over the {limit}-byte limit"
    )]
    TooLarge {
        /// Relative path.
        path: String,
        /// Size of the memory's whole text (frontmatter and body).
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// No such memory.
    #[error("no memory named `{0}`")]
    NotFound(String),
    /// A conditional write ([`ExpectedVersion`](crate::ExpectedVersion)) found another
    /// version than the one it was based on: the memory changed (or appeared, or went) since the
    /// caller read it. Nothing was written.
    #[error(
        "conflict on `{path}`: expected version {expected}, but the current version is {current}; read it again and retry"
    )]
    VersionConflict {
        /// Relative path.
        path: String,
        /// The version the write was based on (`none`: it expected no memory there).
        expected: String,
        /// The current version (`none`: there is no memory there).
        current: String,
    },
    /// The file is not valid UTF-8 text or is too large.
    #[error("cannot read memory `{path}`: {reason}")]
    Unreadable {
        /// Relative path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The cross-process lock could not be taken.
    #[error("could not lock the memory directory: {0}")]
    Lock(String),
    /// A non-file backend (a database, a remote service) failed. `backend` names it
    /// (e.g. `postgres`); the source is the backend's own error.
    #[error("{backend} memory backend: {source}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A credential found by the filter is a refused write: [`MemoryError::SensitiveData`] naming the
/// pattern.
impl From<memloop_secrets::SecretFound> for MemoryError {
    fn from(found: memloop_secrets::SecretFound) -> Self {
        MemoryError::SensitiveData {
            pattern: found.pattern.to_owned(),
        }
    }
}

impl MemoryError {
    /// Wrap an I/O error with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
