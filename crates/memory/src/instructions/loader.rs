//! The instruction loader: which files, in which order, and the `@path` import walk.

use super::config::InstructionConfig;
use super::markdown::{Reference, analyze, find_references, split_frontmatter, strip_comments};
use super::report::{FileStatus, InstructionKind, LoadReport, ReportEntry, SkipReason};
use super::rules;
use memloop_core::{CharEstimator, TokenCounter};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Fatal errors of a load. Problems with single files are never errors: they are in the report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstructionError {
    /// The working dir or the configured project root cannot be resolved.
    #[error("cannot resolve directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The working dir is not inside the configured project root.
    #[error("working directory {working_dir} is not inside the project root {root}")]
    OutsideRoot {
        /// The working dir.
        working_dir: PathBuf,
        /// The project root.
        root: PathBuf,
    },
}

/// The memory index text, handed in by the caller (e.g. from `MemoryStore::load_index`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryIndexText {
    /// Where it comes from (shown in the prompt and the report).
    pub path: PathBuf,
    /// The index content.
    pub content: String,
}

/// Per-load inputs.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Files the agent touched (absolute, or relative to the working dir), for conditional rules.
    pub touched_files: Vec<PathBuf>,
    /// The memory index, loaded last.
    pub memory_index: Option<MemoryIndexText>,
}

/// One loaded instruction file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionFile {
    /// Its path.
    pub path: PathBuf,
    /// Its kind (imports carry their root's kind).
    pub kind: InstructionKind,
    /// Import depth (0 = top level).
    pub depth: usize,
    /// The file that imported it.
    pub imported_from: Option<PathBuf>,
    /// The content: frontmatter and block HTML comments removed, `@path` lines kept.
    pub content: String,
}

/// The result of a load: files in precedence order (later wins) and the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    /// The loaded files, in order; an importing file comes right before what it imports.
    pub files: Vec<InstructionFile>,
    /// Everything considered, loaded or skipped.
    pub report: LoadReport,
}

/// Loads project instructions per SPEC section 11.
///
/// ```
/// use memloop_memory::{InstructionConfig, InstructionLoader, LoadOptions};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("CLAUDE.md"), "Use tabs. See @notes.md\n").unwrap();
/// std::fs::write(dir.path().join("notes.md"), "Notes.\n").unwrap();
/// let config = InstructionConfig::claude()
///     .with_project_root(dir.path())
///     .with_managed_root(None)
///     .with_user_base(None);
/// let loaded = InstructionLoader::new(config).load(dir.path(), &LoadOptions::default()).unwrap();
/// assert_eq!(loaded.files.len(), 2);
/// assert!(loaded.files[1].path.ends_with("notes.md"));
/// ```
#[derive(Clone)]
pub struct InstructionLoader {
    config: InstructionConfig,
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for InstructionLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstructionLoader")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl InstructionLoader {
    /// A loader counting tokens with the chars/4 estimator.
    pub fn new(config: InstructionConfig) -> Self {
        Self::with_counter(config, Arc::new(CharEstimator))
    }

    /// A loader counting tokens with `counter`.
    pub fn with_counter(config: InstructionConfig, counter: Arc<dyn TokenCounter>) -> Self {
        Self { config, counter }
    }

    /// The configuration.
    pub fn config(&self) -> &InstructionConfig {
        &self.config
    }

    /// The project root (top of the walk) for `working_dir`, canonicalised.
    pub fn project_root(&self, working_dir: &Path) -> Result<PathBuf, InstructionError> {
        let cwd = canonical_dir(working_dir)?;
        match &self.config.project_root {
            Some(root) => canonical_dir(root),
            None => Ok(cwd
                .ancestors()
                .find(|dir| dir.join(".git").exists())
                .unwrap_or(&cwd)
                .to_path_buf()),
        }
    }

    /// Load every instruction file for `working_dir`: managed, user, then each directory from
    /// the project root down to `working_dir`, then the memory index. Later wins.
    pub fn load(
        &self,
        working_dir: &Path,
        options: &LoadOptions,
    ) -> Result<Instructions, InstructionError> {
        let cwd = canonical_dir(working_dir)?;
        let root = self.project_root(&cwd)?;
        let below = cwd
            .strip_prefix(&root)
            .map_err(|_| InstructionError::OutsideRoot {
                working_dir: cwd.clone(),
                root: root.clone(),
            })?;
        let _span = tracing::debug_span!("load_instructions", root = %root.display()).entered();
        let touched: Vec<PathBuf> = options
            .touched_files
            .iter()
            .map(|f| {
                if f.is_absolute() {
                    f.clone()
                } else {
                    cwd.join(f)
                }
            })
            .collect();
        let mut walk = Walk {
            config: &self.config,
            counter: self.counter.as_ref(),
            root: root.clone(),
            touched,
            seen: HashSet::new(),
            out: Instructions::default(),
        };
        let c = &self.config;
        if let Some(managed) = &c.managed_root {
            walk.top(
                &managed.join(&c.project_file),
                InstructionKind::Managed,
                true,
            );
            walk.rules(&managed.join("rules"), &root, true);
        }
        if let Some(base) = &c.user_base {
            walk.top(&base.join(&c.project_file), InstructionKind::User, true);
            walk.rules(&base.join("rules"), &root, true);
        }
        let mut dir = root.clone();
        let mut dirs = vec![dir.clone()];
        for part in below.components() {
            dir.push(part);
            dirs.push(dir.clone());
        }
        for dir in &dirs {
            let app_dir = dir.join(&c.app_dir);
            walk.top(&dir.join(&c.project_file), InstructionKind::Project, false);
            walk.top(
                &app_dir.join(&c.project_file),
                InstructionKind::Project,
                false,
            );
            walk.rules(&app_dir.join("rules"), dir, false);
            walk.top(&dir.join(&c.local_file), InstructionKind::Local, false);
        }
        if let Some(index) = &options.memory_index {
            walk.memory_index(index);
        }
        let mut out = walk.out;
        out.report.project_root = root;
        out.report.working_dir = cwd;
        out.report.total_bytes = out.report.loaded().map(|e| e.bytes).sum();
        out.report.total_tokens = out.report.loaded().map(|e| e.tokens).sum();
        tracing::debug!(
            files = out.files.len(),
            tokens = out.report.total_tokens,
            "instructions loaded"
        );
        Ok(out)
    }
}

fn canonical_dir(path: &Path) -> Result<PathBuf, InstructionError> {
    std::fs::canonicalize(path).map_err(|source| InstructionError::Directory {
        path: path.to_path_buf(),
        source,
    })
}

/// How a file got into the walk.
#[derive(Clone, Copy)]
struct Origin<'a> {
    kind: InstructionKind,
    /// Managed and user files may import from anywhere; project files only when allowed.
    trusted: bool,
    depth: usize,
    imported_from: Option<&'a Path>,
    reference: Option<&'a Reference>,
    /// For rules: the dir their `paths:` globs are relative to.
    rule_base: Option<&'a Path>,
}

struct Walk<'a> {
    config: &'a InstructionConfig,
    counter: &'a dyn TokenCounter,
    root: PathBuf,
    touched: Vec<PathBuf>,
    seen: HashSet<PathBuf>,
    out: Instructions,
}

impl Walk<'_> {
    fn top(&mut self, path: &Path, kind: InstructionKind, trusted: bool) {
        let origin = Origin {
            kind,
            trusted,
            depth: 0,
            imported_from: None,
            reference: None,
            rule_base: None,
        };
        let absent =
            std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        if absent {
            // Nothing there (or a dangling symlink): a standard location without a file.
            self.skip(path, origin, SkipReason::Absent, 0, 0);
            return;
        }
        self.file(path, origin);
    }

    fn rules(&mut self, dir: &Path, base: &Path, trusted: bool) {
        let mut files = Vec::new();
        collect_markdown(dir, &mut files, &mut HashSet::new());
        files.sort();
        for path in files {
            let origin = Origin {
                kind: InstructionKind::Rule,
                trusted,
                depth: 0,
                imported_from: None,
                reference: None,
                rule_base: Some(base),
            };
            self.file(&path, origin);
        }
    }

    fn memory_index(&mut self, index: &MemoryIndexText) {
        let origin = Origin {
            kind: InstructionKind::MemoryIndex,
            trusted: true,
            depth: 0,
            imported_from: None,
            reference: None,
            rule_base: None,
        };
        if index.content.trim().is_empty() {
            self.skip(&index.path, origin, SkipReason::Absent, 0, 0);
        } else {
            self.loaded(&index.path, origin, index.content.clone());
        }
    }

    fn file(&mut self, path: &Path, origin: Origin<'_>) {
        let canonical = match std::fs::canonicalize(path) {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.skip(path, origin, SkipReason::Missing, 0, 0);
            }
            Err(e) => {
                let error = e.to_string();
                return self.skip(path, origin, SkipReason::Unreadable { error }, 0, 0);
            }
        };
        if origin.depth > 0
            && !origin.trusted
            && !self.config.allow_outside_project
            && !canonical.starts_with(&self.root)
        {
            let root = self.root.clone();
            return self.skip(path, origin, SkipReason::OutsideProject { root }, 0, 0);
        }
        if origin.depth > self.config.max_include_depth {
            let reason = SkipReason::TooDeep {
                depth: origin.depth,
                max: self.config.max_include_depth,
            };
            return self.skip(path, origin, reason, 0, 0);
        }
        if self.seen.contains(&canonical) {
            return self.skip(path, origin, SkipReason::AlreadyLoaded, 0, 0);
        }
        if !canonical.is_file() {
            return self.skip(path, origin, SkipReason::NotAFile, 0, 0);
        }
        let bytes = match std::fs::read(&canonical) {
            Ok(b) => b,
            Err(e) => {
                let error = e.to_string();
                return self.skip(path, origin, SkipReason::Unreadable { error }, 0, 0);
            }
        };
        let size = bytes.len() as u64;
        let Ok(text) = String::from_utf8(bytes) else {
            return self.skip(path, origin, SkipReason::InvalidUtf8, size, 0);
        };
        let split = split_frontmatter(&text);
        if let Some(base) = origin.rule_base {
            let patterns = rules::rule_paths(split.frontmatter);
            if !patterns.is_empty()
                && !rules::matches_any(&rules::compile(&patterns), base, &self.touched)
            {
                let tokens = self.counter.count(split.body);
                let reason = SkipReason::ConditionNotMet { paths: patterns };
                return self.skip(path, origin, reason, split.body.len() as u64, tokens);
            }
        }
        self.seen.insert(canonical);
        let analysis = analyze(split.body);
        let content = strip_comments(split.body, &analysis);
        let references = find_references(split.body, &analysis);
        self.loaded(path, origin, content);
        for reference in &references {
            self.import(path, origin, reference);
        }
    }

    fn import(&mut self, from: &Path, parent: Origin<'_>, reference: &Reference) {
        let origin = Origin {
            kind: parent.kind,
            trusted: parent.trusted,
            depth: parent.depth + 1,
            imported_from: Some(from),
            reference: Some(reference),
            rule_base: None,
        };
        let target = reference.target.as_str();
        let resolved = if let Some(rest) = target.strip_prefix("~/") {
            match &self.config.home_dir {
                Some(home) => home.join(rest),
                None => return self.skip(Path::new(target), origin, SkipReason::NoHomeDir, 0, 0),
            }
        } else {
            from.parent().unwrap_or(Path::new("")).join(target)
        };
        let resolved = rules::normalize(&resolved);
        let extension = resolved
            .extension()
            .map(|e| e.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !self.config.is_text_extension(&extension) {
            // A path-like token naming an existing non-text file is reported; anything else
            // (`@pytest.mark.benchmark`, `@types/node`, `@alice`) is not an import at all.
            if target.contains('/') && resolved.is_file() {
                return self.skip(&resolved, origin, SkipReason::NotText { extension }, 0, 0);
            }
            tracing::trace!(token = %reference.raw, "not an import");
            return;
        }
        self.file(&resolved, origin);
    }

    fn loaded(&mut self, path: &Path, origin: Origin<'_>, content: String) {
        let chars = content.chars().count();
        let warning = (chars > self.config.large_file_chars).then(|| {
            format!(
                "{chars} characters, over the {} character limit; large instruction files cost \
                 context on every request",
                self.config.large_file_chars
            )
        });
        let entry = self.entry(path, origin, FileStatus::Loaded, content.len() as u64, 0);
        let tokens = self.counter.count(&content);
        self.out.report.entries.push(ReportEntry {
            tokens,
            warning,
            ..entry
        });
        self.out.files.push(InstructionFile {
            path: path.to_path_buf(),
            kind: origin.kind,
            depth: origin.depth,
            imported_from: origin.imported_from.map(Path::to_path_buf),
            content,
        });
    }

    fn skip(&mut self, path: &Path, origin: Origin<'_>, reason: SkipReason, bytes: u64, tok: u64) {
        if reason != SkipReason::Absent {
            tracing::debug!(path = %path.display(), ?reason, "instruction file skipped");
        }
        let entry = self.entry(path, origin, FileStatus::Skipped(reason), bytes, tok);
        self.out.report.entries.push(entry);
    }

    fn entry(
        &self,
        path: &Path,
        origin: Origin<'_>,
        status: FileStatus,
        bytes: u64,
        tokens: u64,
    ) -> ReportEntry {
        ReportEntry {
            path: path.to_path_buf(),
            kind: origin.kind,
            depth: origin.depth,
            imported_from: origin.imported_from.map(Path::to_path_buf),
            reference: origin.reference.map(|r| r.raw.clone()),
            status,
            bytes,
            tokens,
            warning: None,
        }
    }
}

/// `*.md` files under `dir`, recursively; each directory is listed once (by canonical path), so
/// symlinked directory loops end.
fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>, visited: &mut HashSet<PathBuf>) {
    let Ok(canonical) = std::fs::canonicalize(dir) else {
        return;
    };
    if !visited.insert(canonical) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_markdown(&path, out, visited);
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("md"))
        {
            out.push(path);
        }
    }
}
