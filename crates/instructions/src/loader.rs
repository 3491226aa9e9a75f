//! The instruction loader: which files, in which order (the import walk is in `walk.rs`).

use super::config::InstructionConfig;
use super::loaded::{Instructions, LoadOptions};
use super::report::InstructionKind;
use super::walk::Walk;
use memloop_core::tokens::{CharEstimator, TokenCounter};
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

/// Loads project instructions: each level's files in load order (later wins), their `@path`
/// imports (depth-limited, each file at most once), and a report of what was loaded or skipped
/// and why.
///
/// ```
/// use memloop_instructions::{InstructionConfig, InstructionLoader, LoadOptions};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("CLAUDE.md"), "Use tabs. See @notes.md\n").unwrap();
/// std::fs::write(dir.path().join("notes.md"), "Notes.\n").unwrap();
/// let config = InstructionConfig::claude(&memloop_host::env::EnvVars::from_process())
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
        let mut walk = Walk::new(&self.config, self.counter.as_ref(), root.clone(), touched);
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
        let mut out = walk.finish();
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
