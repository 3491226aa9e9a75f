//! One load's walk: visiting a file, its `@path` imports, and recording the outcome.

use super::config::InstructionConfig;
use super::loaded::{InstructionFile, Instructions, MemoryIndexText};
use super::markdown::{Reference, analyze, find_references, strip_comments};
use super::report::{FileStatus, InstructionKind, ReportEntry, SkipReason};
use super::rules;
use memloop_core::tokens::TokenCounter;
use memloop_text::frontmatter::{Closing, split as split_frontmatter};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

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

pub(super) struct Walk<'a> {
    config: &'a InstructionConfig,
    counter: &'a dyn TokenCounter,
    /// The canonical project root.
    root: PathBuf,
    /// Touched files, absolute.
    touched: Vec<PathBuf>,
    /// Canonical paths loaded so far.
    seen: HashSet<PathBuf>,
    out: Instructions,
}

impl<'a> Walk<'a> {
    pub(super) fn new(
        config: &'a InstructionConfig,
        counter: &'a dyn TokenCounter,
        root: PathBuf,
        touched: Vec<PathBuf>,
    ) -> Self {
        Self {
            config,
            counter,
            root,
            touched,
            seen: HashSet::new(),
            out: Instructions::default(),
        }
    }

    /// The files and report entries collected so far.
    pub(super) fn finish(self) -> Instructions {
        self.out
    }
    pub(super) fn top(&mut self, path: &Path, kind: InstructionKind, trusted: bool) {
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

    pub(super) fn rules(&mut self, dir: &Path, base: &Path, trusted: bool) {
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

    pub(super) fn memory_index(&mut self, index: &MemoryIndexText) {
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
        let split = split_frontmatter(&text, Closing::DashesOrDots);
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
        // Drop `.` components for display; `..` stays, so symlinks resolve as the OS does.
        let resolved: PathBuf = resolved.components().collect();
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
