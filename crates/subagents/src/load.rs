//! Reading sub-agent definitions from markdown files: [`AgentDirs`] (see the crate docs for the
//! format and the dirs).

use crate::definition::AgentDefinition;
use memloop_host::env::EnvVars;
use memloop_paths::MemoryDirResolver;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A definition file larger than this is skipped (a prompt, not a data set).
pub const MAX_DEFINITION_BYTES: u64 = 256 * 1024;

/// A definition file that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionWarning {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for DefinitionWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "agent definition {} skipped: {}",
            self.path.display(),
            self.reason
        )
    }
}

/// What [`AgentDirs::load`] found.
#[derive(Debug, Clone, Default)]
pub struct LoadedAgents {
    /// The definitions, in precedence order, one per name.
    pub definitions: Vec<AgentDefinition>,
    /// The files skipped (malformed, unreadable, too large, or a name defined before).
    pub warnings: Vec<DefinitionWarning>,
}

/// Where agent definitions are read from, in precedence order (earlier wins on a name clash).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop_subagents::AgentDirs;
/// let project = tempfile::tempdir()?;
/// let dir = project.path().join(".claude/agents");
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("reviewer.md"), "---\nname: reviewer\ndescription: Reviews.\n---\nYou review.\n")?;
/// std::fs::write(dir.join("broken.md"), "no frontmatter here")?;
/// let loaded = AgentDirs::new().dir(&dir).load();
/// assert_eq!(loaded.definitions[0].name, "reviewer");
/// assert!(loaded.warnings[0].reason.contains("no frontmatter"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentDirs {
    dirs: Vec<PathBuf>,
}

impl AgentDirs {
    /// No dirs.
    pub fn new() -> Self {
        Self::default()
    }

    /// The project's `.memloop/agents/` and `.claude/agents/`, then the user's
    /// `<MEMLOOP_HOME or ~/.memloop>/agents/` and `<CLAUDE_CONFIG_DIR or ~/.claude>/agents/`
    /// (a user dir whose base cannot be found, e.g. without `HOME`, is left out).
    pub fn standard(project: &Path, env: &EnvVars) -> Self {
        let mut dirs = Self::new()
            .dir(project.join(".memloop").join("agents"))
            .dir(project.join(".claude").join("agents"));
        for resolver in [
            MemoryDirResolver::new(project),
            MemoryDirResolver::claude_code(project),
        ] {
            match resolver.env(env.clone()).base_dir() {
                Ok(base) => dirs = dirs.dir(base.join("agents")),
                Err(e) => tracing::debug!(error = %e, "no user agent dir"),
            }
        }
        dirs
    }

    /// Add a dir after the others (builder style).
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dirs.push(dir.into());
        self
    }

    /// The dirs, in precedence order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Read every `*.md` file of every dir (in file-name order within a dir). Absent dirs are
    /// fine; every skipped file is logged as a warning and listed.
    pub fn load(&self) -> LoadedAgents {
        let mut loaded = LoadedAgents::default();
        let mut names = BTreeSet::new();
        let mut seen_dirs = BTreeSet::new();
        for dir in &self.dirs {
            // The same dir named twice (a user base inside the project) is read once.
            let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            if !seen_dirs.insert(key) {
                continue;
            }
            for path in definition_files(dir, &mut loaded.warnings) {
                let result = read_definition(&path).and_then(|def| {
                    if names.insert(def.name.clone()) {
                        Ok(def)
                    } else {
                        Err(format!(
                            "an agent named `{}` is already defined by a file that takes \
                             precedence",
                            def.name
                        ))
                    }
                });
                match result {
                    Ok(def) => {
                        tracing::debug!(agent = %def.name, path = %path.display(), "agent definition loaded");
                        loaded.definitions.push(def);
                    }
                    Err(reason) => warn(&mut loaded.warnings, path, reason),
                }
            }
        }
        loaded
    }
}

fn warn(warnings: &mut Vec<DefinitionWarning>, path: PathBuf, reason: String) {
    let warning = DefinitionWarning { path, reason };
    tracing::warn!("{warning}");
    warnings.push(warning);
}

/// The `*.md` files directly in `dir`, sorted by name.
fn definition_files(dir: &Path, warnings: &mut Vec<DefinitionWarning>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warn(
                warnings,
                dir.to_path_buf(),
                format!("the dir cannot be read: {e}"),
            );
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md") && p.is_file())
        .collect();
    files.sort();
    files
}

fn read_definition(path: &Path) -> Result<AgentDefinition, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("it cannot be read: {e}"))?
        .len();
    if size > MAX_DEFINITION_BYTES {
        return Err(format!(
            "it is {size} bytes, over the {MAX_DEFINITION_BYTES}-byte limit"
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("it cannot be read: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?;
    crate::parse::parse_definition(&text, path)
}
