//! The load report: every file the loader considered, what happened to it, and its size.

use serde::Serialize;
use std::path::PathBuf;

/// Where an instruction file comes from. Imported files carry the kind of the file that
/// (directly or indirectly) imported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InstructionKind {
    /// Organisation-wide, `/etc/<app>/`.
    Managed,
    /// The user's own, `<base>/`.
    User,
    /// A committed project file (`CLAUDE.md` or `.claude/CLAUDE.md` in a directory).
    Project,
    /// The untracked local file (`CLAUDE.local.md`).
    Local,
    /// A file under a `rules/` dir.
    Rule,
    /// The memory index (`MEMORY.md`) handed in by the caller.
    MemoryIndex,
}

impl InstructionKind {
    /// A short lowercase label (`managed`, `user`, `project`, `local`, `rule`, `memory index`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
            Self::Rule => "rule",
            Self::MemoryIndex => "memory index",
        }
    }
}

/// Why a considered file was not loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    /// A standard location (`CLAUDE.md` in some directory, ...) that holds no file. Not an error.
    Absent,
    /// An `@path` import whose target does not exist (ignored: a missing import is not an error).
    Missing,
    /// The path exists but is not a regular file (a directory, a socket, ...).
    NotAFile,
    /// An import whose extension is not a text extension.
    NotText {
        /// The extension, empty when there is none.
        extension: String,
    },
    /// The import sits deeper than the configured maximum.
    TooDeep {
        /// Its depth.
        depth: usize,
        /// The maximum.
        max: usize,
    },
    /// The file was already loaded earlier in this load (cycles and repeats are harmless).
    AlreadyLoaded,
    /// A project file imports a file outside the project root and that is not allowed.
    OutsideProject {
        /// The project root.
        root: PathBuf,
    },
    /// A conditional rule whose `paths:` globs match none of the touched files.
    ConditionNotMet {
        /// The rule's globs.
        paths: Vec<String>,
    },
    /// The file could not be read.
    Unreadable {
        /// The OS error.
        error: String,
    },
    /// The file is not valid UTF-8.
    InvalidUtf8,
    /// `~/` could not be expanded (no home dir configured).
    NoHomeDir,
}

/// What happened to one considered file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FileStatus {
    /// Loaded into the instructions.
    Loaded,
    /// Not loaded.
    Skipped(SkipReason),
}

/// One considered file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportEntry {
    /// The path (as resolved, not canonicalised; the memory index uses the caller's label).
    pub path: PathBuf,
    /// Kind of the file (imports carry their root's kind).
    pub kind: InstructionKind,
    /// Import depth: 0 for a top-level file.
    pub depth: usize,
    /// The file whose `@path` import led here.
    pub imported_from: Option<PathBuf>,
    /// The import as written (`@` excluded), for imported files.
    pub reference: Option<String>,
    /// Loaded or skipped, and why (serialised flat: `status`, `reason` and the reason's fields).
    #[serde(flatten)]
    pub status: FileStatus,
    /// Size of the content as loaded (frontmatter and block comments removed), in bytes; for a
    /// skipped file that could be read, its size as read; else 0.
    pub bytes: u64,
    /// Tokens of that content (the loader's [`TokenCounter`](memloop_core::tokens::TokenCounter)).
    pub tokens: u64,
    /// A warning, e.g. that the file is over the configured size.
    pub warning: Option<String>,
}

impl ReportEntry {
    /// Whether the file was loaded.
    pub fn is_loaded(&self) -> bool {
        self.status == FileStatus::Loaded
    }

    /// The skip reason, if skipped.
    pub fn skip_reason(&self) -> Option<&SkipReason> {
        match &self.status {
            FileStatus::Loaded => None,
            FileStatus::Skipped(reason) => Some(reason),
        }
    }
}

/// The report of one load.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LoadReport {
    /// The top of the walk.
    pub project_root: PathBuf,
    /// The working dir (bottom of the walk).
    pub working_dir: PathBuf,
    /// Every considered file, in the order considered.
    pub entries: Vec<ReportEntry>,
    /// Bytes of everything loaded.
    pub total_bytes: u64,
    /// Tokens of everything loaded.
    pub total_tokens: u64,
}

impl LoadReport {
    /// The loaded entries.
    pub fn loaded(&self) -> impl Iterator<Item = &ReportEntry> {
        self.entries.iter().filter(|e| e.is_loaded())
    }

    /// The skipped entries, leaving out [`SkipReason::Absent`] standard locations.
    pub fn skipped(&self) -> impl Iterator<Item = &ReportEntry> {
        self.entries
            .iter()
            .filter(|e| !e.is_loaded() && e.skip_reason() != Some(&SkipReason::Absent))
    }

    /// Every warning, prefixed with its file.
    pub fn warnings(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|e| {
                e.warning
                    .as_ref()
                    .map(|w| format!("{}: {w}", e.path.display()))
            })
            .collect()
    }

    /// The entry for `path` (the first one when considered more than once).
    pub fn entry(&self, path: &std::path::Path) -> Option<&ReportEntry> {
        self.entries.iter().find(|e| e.path == path)
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Absent => f.write_str("absent"),
            Self::Missing => f.write_str("missing"),
            Self::NotAFile => f.write_str("not a regular file"),
            Self::NotText { extension } => write!(f, "not a text file (.{extension})"),
            Self::TooDeep { depth, max } => write!(f, "too deep (depth {depth} > {max})"),
            Self::AlreadyLoaded => f.write_str("already loaded"),
            Self::OutsideProject { root } => {
                write!(f, "outside the project {} (not allowed)", root.display())
            }
            Self::ConditionNotMet { paths } => {
                write!(f, "no touched file matches {}", paths.join(", "))
            }
            Self::Unreadable { error } => write!(f, "unreadable: {error}"),
            Self::InvalidUtf8 => f.write_str("not valid UTF-8"),
            Self::NoHomeDir => f.write_str("no home dir to expand `~/`"),
        }
    }
}

/// A human-readable listing (what a CLI prints): one line per considered file except absent
/// standard locations, then totals and warnings.
impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "instructions for {} (project root {})",
            self.working_dir.display(),
            self.project_root.display()
        )?;
        for e in self
            .entries
            .iter()
            .filter(|e| e.skip_reason() != Some(&SkipReason::Absent))
        {
            let indent = "  ".repeat(e.depth + 1);
            let status = match &e.status {
                FileStatus::Loaded => format!("{} B, {} tokens", e.bytes, e.tokens),
                FileStatus::Skipped(reason) => format!("skipped: {reason}"),
            };
            writeln!(
                f,
                "{indent}[{}] {} ({status})",
                e.kind.label(),
                e.path.display()
            )?;
        }
        let loaded = self.loaded().count();
        writeln!(
            f,
            "{loaded} loaded, {} skipped; {} bytes, {} tokens",
            self.skipped().count(),
            self.total_bytes,
            self.total_tokens
        )?;
        for warning in self.warnings() {
            writeln!(f, "warning: {warning}")?;
        }
        Ok(())
    }
}
