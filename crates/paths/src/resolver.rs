//! Where the memory dir is: the resolution chain (explicit dir or `MEMLOOP_MEMORY_DIR`, then
//! managed (policy), local or user settings, then the per-project default), its reason, and validation of
//! configured paths.

use crate::env::{CLAUDE_CONFIG_DIR, CLAUDE_COWORK_MEMORY_PATH_OVERRIDE, MEMLOOP_HOME, MEMORY_DIR};
use crate::project::{canonical_project_root, project_dir, root_dir};
use memloop_host::env::EnvVars;
use memloop_host::paths::normalize_lexically;
use memloop_store::MemoryError;
use std::fmt;
use std::path::{Path, PathBuf};

/// Settings key naming the memory dir in memloop's settings files.
pub const SETTINGS_KEY: &str = "memory_dir";
/// The same key in Claude Code's settings files.
pub const CLAUDE_SETTINGS_KEY: &str = "autoMemoryDirectory";
/// The settings key that switches memory on or off (a boolean; Claude Code's name).
pub const AUTO_MEMORY_KEY: &str = "autoMemoryEnabled";

/// Which config home layout to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfigFlavor {
    /// memloop's own: base `MEMLOOP_HOME` else `~/.memloop`, project settings dir `.memloop/`.
    #[default]
    Memloop,
    /// Claude Code's: base `CLAUDE_CONFIG_DIR` else `~/.claude`, settings dir `.claude/`, so
    /// memloop reads and writes an existing Claude Code memory dir.
    ClaudeCode,
}

impl ConfigFlavor {
    fn base_env(self) -> &'static str {
        match self {
            Self::Memloop => MEMLOOP_HOME,
            Self::ClaudeCode => CLAUDE_CONFIG_DIR,
        }
    }
    /// The settings key naming the memory dir (`memory_dir`, or Claude Code's
    /// `autoMemoryDirectory`).
    pub fn settings_key(self) -> &'static str {
        match self {
            Self::Memloop => SETTINGS_KEY,
            Self::ClaudeCode => CLAUDE_SETTINGS_KEY,
        }
    }

    /// The system-wide managed (policy) settings file: `/etc/memloop/managed-settings.json`,
    /// or Claude Code's `/etc/claude-code/managed-settings.json`.
    pub fn managed_settings_path(self) -> PathBuf {
        PathBuf::from(match self {
            Self::Memloop => "/etc/memloop/managed-settings.json",
            Self::ClaudeCode => "/etc/claude-code/managed-settings.json",
        })
    }

    /// The per-user and per-project config dir name (`.memloop` or `.claude`).
    pub fn dir_name(self) -> &'static str {
        match self {
            Self::Memloop => ".memloop",
            Self::ClaudeCode => ".claude",
        }
    }
}

/// The rule of the chain that chose the memory dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolutionRule {
    /// Explicit override from the embedding application.
    Override,
    /// `MEMLOOP_MEMORY_DIR`.
    EnvVar,
    /// `memory_dir` in the local (untracked) project settings.
    LocalSettings,
    /// `memory_dir` in the user settings.
    UserSettings,
    /// `<base>/projects/<slug>/memory/`.
    Default,
    /// The memory dir key in the managed (policy) settings file.
    ManagedSettings,
}

impl fmt::Display for ResolutionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Override => "override",
            Self::EnvVar => "env",
            Self::LocalSettings => "local-settings",
            Self::UserSettings => "user-settings",
            Self::Default => "default",
            Self::ManagedSettings => "managed-settings",
        })
    }
}

/// A resolved memory dir and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedMemoryDir {
    /// The memory dir (absolute; it may not exist yet).
    pub dir: PathBuf,
    /// The rule that chose it.
    pub rule: ResolutionRule,
    /// A sentence for humans (the CLI prints it).
    pub reason: String,
}

/// Resolves the memory dir for a project.
///
/// ```
/// use memloop_paths::{MemoryDirResolver, ResolutionRule};
/// use memloop_host::env::EnvVars;
/// let env = EnvVars::from_pairs([("HOME", "/home/ann"), ("MEMLOOP_MEMORY_DIR", "/data/mem")]);
/// let r = MemoryDirResolver::new("/work/proj").env(env).resolve().unwrap();
/// assert_eq!(r.rule, ResolutionRule::EnvVar);
/// assert_eq!(r.dir, std::path::PathBuf::from("/data/mem"));
/// ```
#[derive(Debug, Clone)]
pub struct MemoryDirResolver {
    project: PathBuf,
    flavor: ConfigFlavor,
    override_dir: Option<PathBuf>,
    env: EnvVars,
    managed: Option<PathBuf>,
}

impl MemoryDirResolver {
    /// The project dir this resolver was made for.
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// A resolver for the project at `project`, memloop layout, process environment.
    pub fn new(project: impl Into<PathBuf>) -> Self {
        Self {
            project: project.into(),
            flavor: ConfigFlavor::Memloop,
            override_dir: None,
            env: EnvVars::from_process(),
            managed: None,
        }
    }

    /// Use Claude Code's layout (`~/.claude` or `CLAUDE_CONFIG_DIR`).
    pub fn claude_code(project: impl Into<PathBuf>) -> Self {
        Self::new(project).flavor(ConfigFlavor::ClaudeCode)
    }

    /// Choose the layout.
    pub fn flavor(mut self, flavor: ConfigFlavor) -> Self {
        self.flavor = flavor;
        self
    }

    /// The layout this resolver uses.
    pub fn config_flavor(&self) -> ConfigFlavor {
        self.flavor
    }

    /// Use this environment instead of the process's.
    pub fn env(mut self, env: EnvVars) -> Self {
        self.env = env;
        self
    }

    /// Rule 1: an explicit dir from the embedding application (validated, used verbatim).
    pub fn override_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.override_dir = Some(dir.into());
        self
    }

    /// Read the managed (policy) settings from `path` instead of the flavor's system-wide file
    /// ([`ConfigFlavor::managed_settings_path`]).
    pub fn managed_settings(mut self, path: impl Into<PathBuf>) -> Self {
        self.managed = Some(path.into());
        self
    }

    /// The managed (policy) settings file this resolver reads.
    pub fn managed_settings_path(&self) -> PathBuf {
        self.managed
            .clone()
            .unwrap_or_else(|| self.flavor.managed_settings_path())
    }

    /// Whether a settings file switches memory on or off with `autoMemoryEnabled` (a boolean):
    /// the first file that sets it wins, in the order managed (policy), local
    /// (`<project>/.memloop/settings.local.json`), project (`.memloop/settings.json`: switching
    /// memory off is safe to let a repository do), user (`<base>/settings.json`). `None` when
    /// no file sets it; otherwise the value and the file.
    pub fn auto_memory_setting(&self) -> Option<(bool, PathBuf)> {
        let app = self.project.join(self.flavor.dir_name());
        let mut files = vec![
            self.managed_settings_path(),
            app.join("settings.local.json"),
            app.join("settings.json"),
        ];
        if let Ok(base) = self.base_dir() {
            files.push(base.join("settings.json"));
        }
        files.into_iter().find_map(|f| {
            settings_value(&f, AUTO_MEMORY_KEY)
                .and_then(|v| v.as_bool())
                .map(|on| (on, f))
        })
    }

    /// The config home: `MEMLOOP_HOME` (or `CLAUDE_CONFIG_DIR`), else `~/.memloop` (`~/.claude`).
    pub fn base_dir(&self) -> Result<PathBuf, MemoryError> {
        if let Some(b) = self.env.get(self.flavor.base_env()) {
            return validate_memory_dir(b, None).map_err(|e| match e {
                MemoryError::InvalidMemoryDir { path, reason } => MemoryError::InvalidMemoryDir {
                    path,
                    reason: format!("{} {reason}", self.flavor.base_env()),
                },
                other => other,
            });
        }
        let home = self
            .env
            .home_dir()
            .ok_or_else(|| MemoryError::InvalidMemoryDir {
                path: String::new(),
                reason: "no home directory (HOME is unset) to put the config home in".into(),
            })?;
        Ok(home.join(self.flavor.dir_name()))
    }

    /// `<base>/projects/<slug>` of this project.
    pub fn project_dir(&self) -> Result<PathBuf, MemoryError> {
        Ok(project_dir(&self.base_dir()?, &self.project))
    }

    /// Run the chain (first match wins): override, `MEMLOOP_MEMORY_DIR` (in Claude Code's layout
    /// then `CLAUDE_COWORK_MEMORY_PATH_OVERRIDE`, also verbatim), local settings, user
    /// settings, default. Project settings (`<project>/.memloop/settings.json`, committed) are
    /// never consulted for the dir; a `memory_dir` there is ignored with a warning.
    pub fn resolve(&self) -> Result<ResolvedMemoryDir, MemoryError> {
        let done = |dir: PathBuf, rule: ResolutionRule, reason: String| {
            tracing::debug!(dir = %dir.display(), %rule, %reason, "memory dir resolved");
            Ok(ResolvedMemoryDir { dir, rule, reason })
        };
        if let Some(dir) = &self.override_dir {
            let raw = dir.to_string_lossy();
            validate_memory_dir(&raw, None)?;
            return done(
                dir.clone(),
                ResolutionRule::Override,
                "set explicitly by the application".into(),
            );
        }
        if let Some(raw) = self.env.get(MEMORY_DIR) {
            validate_memory_dir(raw, None).map_err(hint_env)?;
            return done(
                PathBuf::from(raw),
                ResolutionRule::EnvVar,
                format!("{MEMORY_DIR} is set"),
            );
        }
        if matches!(self.flavor, ConfigFlavor::ClaudeCode)
            && let Some(raw) = self.env.get(CLAUDE_COWORK_MEMORY_PATH_OVERRIDE)
        {
            validate_memory_dir(raw, None).map_err(hint_env)?;
            return done(
                PathBuf::from(raw),
                ResolutionRule::EnvVar,
                format!("{CLAUDE_COWORK_MEMORY_PATH_OVERRIDE} is set (Claude Code's layout)"),
            );
        }
        let home = self.env.home_dir();
        let key = self.flavor.settings_key();
        let managed = self.managed_settings_path();
        if let Some(raw) = settings_memory_dir(&managed, key) {
            let dir = validate_memory_dir(&raw, home.as_deref())?;
            return done(
                dir,
                ResolutionRule::ManagedSettings,
                format!("{key} in managed settings {}", managed.display()),
            );
        }
        let app = self.project.join(self.flavor.dir_name());
        warn_project_settings(&app.join("settings.json"), key);
        let local = app.join("settings.local.json");
        if let Some(raw) = settings_memory_dir(&local, key) {
            let dir = validate_memory_dir(&raw, home.as_deref())?;
            self.check_project_redirect(&dir, &local, home.as_deref())?;
            return done(
                dir,
                ResolutionRule::LocalSettings,
                format!("{key} in local settings {}", local.display()),
            );
        }
        let user = self.base_dir()?.join("settings.json");
        if let Some(raw) = settings_memory_dir(&user, key) {
            let dir = validate_memory_dir(&raw, home.as_deref())?;
            return done(
                dir,
                ResolutionRule::UserSettings,
                format!("{key} in user settings {}", user.display()),
            );
        }
        // The root is found once: for the dir and for the reason.
        let root = canonical_project_root(&self.project);
        let dir = root_dir(&self.base_dir()?, &root).join("memory");
        done(
            dir,
            ResolutionRule::Default,
            format!(
                "default location for the project rooted at {}",
                root.display()
            ),
        )
    }
}

impl MemoryDirResolver {
    /// A memory dir named by settings inside the project (`settings.local.json`: a cloned
    /// repository can ship one) must lie inside the project, or inside a dir the user's own
    /// settings list under [`ALLOWED_DIRS_KEY`]. Both sides are compared with symlinks
    /// resolved, so a link inside the project cannot lead out of it.
    fn check_project_redirect(
        &self,
        dir: &Path,
        settings: &Path,
        home: Option<&Path>,
    ) -> Result<(), MemoryError> {
        let target = canonical_prefix(dir);
        let mut allowed = vec![canonical_prefix(&self.project)];
        if let Ok(base) = self.base_dir() {
            allowed.extend(
                settings_list(&base.join("settings.json"), ALLOWED_DIRS_KEY)
                    .iter()
                    .filter_map(|raw| validate_memory_dir(raw, home).ok())
                    .map(|d| canonical_prefix(&d)),
            );
        }
        if allowed.iter().any(|a| target.starts_with(a)) {
            return Ok(());
        }
        tracing::warn!(
            settings = %settings.display(),
            dir = %dir.display(),
            "refusing a project-controlled memory dir outside the project"
        );
        Err(MemoryError::InvalidMemoryDir {
            path: dir.display().to_string(),
            reason: format!(
                "it is set by {} inside the project and lies outside the project; settings a \
                 project ships may not move its memory elsewhere (list the dir under `{}` in \
                 your user settings to allow it)",
                settings.display(),
                ALLOWED_DIRS_KEY
            ),
        })
    }
}

/// User-settings key listing the dirs a project's own settings may put its memory dir in
/// (outside the project itself): `"allowed_memory_dirs": ["~/notes"]`.
pub const ALLOWED_DIRS_KEY: &str = "allowed_memory_dirs";

/// `path` with symlinks resolved as far as it exists (the missing tail joined on lexically).
fn canonical_prefix(path: &Path) -> PathBuf {
    let normal = normalize_lexically(path);
    let mut existing = normal.as_path();
    let mut tail = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(existing) {
            return tail.iter().rev().fold(c, |acc: PathBuf, t| acc.join(t));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_owned());
                existing = parent;
            }
            _ => return normal,
        }
    }
}

/// A list of strings under `key` in a JSON settings file (missing or not a list → empty).
fn settings_list(path: &Path, key: &str) -> Vec<String> {
    let Ok(text) = memloop_host::files::read_regular_to_string(path) else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get(key)?.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn hint_env(e: MemoryError) -> MemoryError {
    match e {
        MemoryError::InvalidMemoryDir { path, reason } => MemoryError::InvalidMemoryDir {
            path,
            reason: format!("{MEMORY_DIR}: {reason} (it is used verbatim: no `~` expansion)"),
        },
        other => other,
    }
}

/// `key` from a JSON settings file; missing file or key → `None`, broken JSON → warning.
fn settings_value(path: &Path, key: &str) -> Option<serde_json::Value> {
    let text = memloop_host::files::read_regular_to_string(path).ok()?;
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(mut v) => v.get_mut(key).map(serde_json::Value::take),
        Err(e) => {
            tracing::warn!(settings = %path.display(), error = %e, "ignoring unreadable settings file");
            None
        }
    }
}

fn settings_memory_dir(path: &Path, key: &str) -> Option<String> {
    settings_value(path, key)?.as_str().map(str::to_owned)
}

fn warn_project_settings(path: &Path, key: &str) {
    if settings_memory_dir(path, key).is_some() {
        tracing::warn!(
            settings = %path.display(),
            "ignoring {key} in project settings: a repository may not choose where memories are written"
        );
    }
}

fn invalid(path: &str, reason: &str) -> MemoryError {
    MemoryError::InvalidMemoryDir {
        path: memloop_store::shown_name(path),
        reason: reason.to_owned(),
    }
}

/// Validate a configured memory path. With `home`, a leading `~` / `~/` is
/// expanded (settings files); without it, the value is taken verbatim. Rejected: empty, NUL,
/// UNC (`\\` or `//`), drive roots (`C:`), relative, shorter than 3 characters after
/// normalising, and `~` forms expanding to the home dir itself or above. Returns the
/// normalised absolute path.
pub fn validate_memory_dir(raw: &str, home: Option<&Path>) -> Result<PathBuf, MemoryError> {
    if raw.trim().is_empty() {
        return Err(invalid(raw, "it is empty"));
    }
    if raw.contains('\0') {
        return Err(invalid(raw, "it contains a NUL character"));
    }
    if raw.starts_with("\\\\") || raw.starts_with("//") {
        return Err(invalid(raw, "UNC/network paths are not allowed"));
    }
    let b = raw.as_bytes();
    if b.len() <= 3
        && b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && b[2..].iter().all(|c| *c == b'/' || *c == b'\\')
    {
        return Err(invalid(raw, "a drive root is not allowed"));
    }
    let path = match (home, raw.strip_prefix('~')) {
        (Some(home), Some(rest))
            if rest.is_empty() || rest.starts_with('/') || rest.starts_with('\\') =>
        {
            let expanded = normalize_lexically(&home.join(rest.trim_start_matches(['/', '\\'])));
            let home_n = normalize_lexically(home);
            if home_n.starts_with(&expanded) {
                return Err(invalid(
                    raw,
                    "it expands to the home directory itself or above it",
                ));
            }
            expanded
        }
        _ => PathBuf::from(raw),
    };
    if !path.is_absolute() {
        return Err(invalid(raw, "it must be an absolute path"));
    }
    let normal = normalize_lexically(&path);
    if normal.as_os_str().len() < 3 {
        return Err(invalid(
            raw,
            "it is too short (a root or near-root directory)",
        ));
    }
    Ok(normal)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn validation_rules() {
        let home = Path::new("/home/ann");
        let bad = [
            ("", "empty"),
            ("   ", "empty"),
            ("rel/dir", "absolute"),
            ("/a", "short"),
            ("/", "short"),
            ("/./a/..", "short"),
            ("C:", "drive"),
            ("c:\\", "drive"),
            ("\\\\server\\share", "UNC"),
            ("//server/share", "UNC"),
            ("/tmp/a\0b", "NUL"),
            ("~", "home"),
            ("~/", "home"),
            ("~/.", "home"),
            ("~/..", "home"),
            ("~/../..", "home"),
        ];
        for (raw, why) in bad {
            let err = validate_memory_dir(raw, Some(home))
                .unwrap_err()
                .to_string();
            assert!(
                err.to_lowercase().contains(&why.to_lowercase()),
                "{raw:?}: {err}"
            );
            assert!(!err.contains('\0'));
        }
        assert_eq!(
            validate_memory_dir("~/notes/../mem", Some(home)).unwrap(),
            Path::new("/home/ann/mem")
        );
        assert_eq!(
            validate_memory_dir("/abc", None).unwrap(),
            Path::new("/abc")
        );
        // Without expansion a `~` path is relative.
        assert!(validate_memory_dir("~/x", None).is_err());
    }

    #[test]
    fn validate_memory_dir_example() {
        use std::path::Path;
        assert!(validate_memory_dir("/srv/mem", None).is_ok());
        assert!(validate_memory_dir("relative/mem", None).is_err());
        assert!(validate_memory_dir("~/..", Some(Path::new("/home/ann"))).is_err());
        assert_eq!(
            validate_memory_dir("~/mem", Some(Path::new("/home/ann"))).unwrap(),
            Path::new("/home/ann/mem")
        );
    }
}
