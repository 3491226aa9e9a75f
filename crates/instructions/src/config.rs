//! Loader configuration: the app name, file names and limits, with presets for the CLAUDE.md and
//! AGENTS.md conventions.

use memloop_host::env::EnvVars;
use std::path::{Path, PathBuf};

/// Extensions (lowercase, no dot) that `@path` imports may load by default.
pub const DEFAULT_TEXT_EXTENSIONS: &[&str] = &[
    "md",
    "markdown",
    "mdx",
    "txt",
    "text",
    "rst",
    "adoc",
    "org",
    "json",
    "jsonc",
    "json5",
    "yaml",
    "yml",
    "toml",
    "ini",
    "cfg",
    "conf",
    "env",
    "csv",
    "tsv",
    "xml",
    "html",
    "htm",
    "css",
    "scss",
    "rs",
    "py",
    "pyi",
    "js",
    "mjs",
    "cjs",
    "jsx",
    "ts",
    "tsx",
    "go",
    "java",
    "kt",
    "kts",
    "swift",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "cs",
    "rb",
    "php",
    "pl",
    "lua",
    "r",
    "scala",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "sql",
    "graphql",
    "proto",
    "tf",
    "hcl",
    "nix",
    "vue",
    "svelte",
    "ex",
    "exs",
    "erl",
    "hs",
    "ml",
    "dart",
    "zig",
    "gradle",
    "properties",
    "lock",
    "log",
    "diff",
    "patch",
    "tex",
    "bib",
];

/// Where the loader looks and what it accepts. Every limit of the loader (import depth, size
/// warning, importable extensions) is a field here.
///
/// ```
/// use memloop_host::env::EnvVars;
/// use memloop_instructions::InstructionConfig;
/// let env = EnvVars::from_pairs([("HOME", "/home/a")]);
/// let claude = InstructionConfig::claude(&env);
/// assert_eq!(claude.project_file, "CLAUDE.md");
/// assert_eq!(claude.app_dir, ".claude");
/// let agents = InstructionConfig::agents(&env);
/// assert_eq!(agents.local_file, "AGENTS.local.md");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionConfig {
    /// The app name (`claude`, `agents`, ...): names the managed dir `/etc/<app>/`.
    pub app: String,
    /// The committed per-directory file (`CLAUDE.md`).
    pub project_file: String,
    /// The untracked per-directory file (`CLAUDE.local.md`).
    pub local_file: String,
    /// The per-directory app dir holding another project file and `rules/` (`.claude`).
    pub app_dir: String,
    /// The managed (organisation-wide) dir; default `/etc/<app>`. Tests point it elsewhere.
    pub managed_root: Option<PathBuf>,
    /// The user config base (`~/.claude`); `None` skips user-level files.
    pub user_base: Option<PathBuf>,
    /// The home dir used to expand `~/` in imports; `None` makes `~/` imports unresolvable.
    pub home_dir: Option<PathBuf>,
    /// The top of the directory walk. `None`: the nearest enclosing git root of the working dir
    /// (a `.git` dir or file), or the working dir itself when it is not in a git repository.
    pub project_root: Option<PathBuf>,
    /// Whether files of the project may import files outside the project root.
    pub allow_outside_project: bool,
    /// The deepest import level loaded (the top-level files are level 0). Default 5.
    pub max_include_depth: usize,
    /// Files longer than this many characters get a warning in the report. Default 40,000.
    pub large_file_chars: usize,
    /// Extensions (lowercase, no dot) that imports may load.
    pub text_extensions: Vec<String>,
}

impl InstructionConfig {
    /// A configuration for `app` with the given file names: managed root `/etc/<app>`, user base
    /// `~/.<app>`, home from `env` (`HOME`, else `USERPROFILE`), git-root discovery, the default
    /// limits.
    pub fn new(
        app: impl Into<String>,
        project_file: impl Into<String>,
        local_file: impl Into<String>,
        env: &EnvVars,
    ) -> Self {
        let app = app.into();
        let home = env.home_dir();
        Self {
            managed_root: Some(Path::new("/etc").join(&app)),
            user_base: home.as_ref().map(|h| h.join(format!(".{app}"))),
            home_dir: home,
            app_dir: format!(".{app}"),
            app,
            project_file: project_file.into(),
            local_file: local_file.into(),
            project_root: None,
            allow_outside_project: false,
            max_include_depth: 5,
            large_file_chars: 40_000,
            text_extensions: DEFAULT_TEXT_EXTENSIONS
                .iter()
                .map(|e| (*e).to_owned())
                .collect(),
        }
    }

    /// The CLAUDE.md convention: `CLAUDE.md`, `CLAUDE.local.md`, `.claude/`, the managed file
    /// `/etc/claude-code/CLAUDE.md` (Claude Code's managed dir), user base `CLAUDE_CONFIG_DIR` or
    /// `~/.claude`, read from `env`.
    ///
    /// ```
    /// use memloop_host::env::EnvVars;
    /// use memloop_instructions::InstructionConfig;
    /// let env = EnvVars::from_pairs([("HOME", "/home/a"), ("CLAUDE_CONFIG_DIR", "/cfg/claude")]);
    /// let config = InstructionConfig::claude(&env);
    /// assert_eq!(config.managed_root, Some(std::path::PathBuf::from("/etc/claude-code")));
    /// assert_eq!(config.user_base, Some(std::path::PathBuf::from("/cfg/claude")));
    /// assert_eq!(config.home_dir, Some(std::path::PathBuf::from("/home/a")));
    /// ```
    pub fn claude(env: &EnvVars) -> Self {
        let mut config = Self::new("claude", "CLAUDE.md", "CLAUDE.local.md", env);
        config.managed_root = Some(Path::new("/etc").join("claude-code"));
        if let Some(dir) = env.get("CLAUDE_CONFIG_DIR") {
            config.user_base = Some(PathBuf::from(dir));
        }
        config
    }

    /// The AGENTS.md convention: `AGENTS.md`, `AGENTS.local.md`, `.agents/`, `/etc/agents/`,
    /// user base `~/.agents`.
    ///
    /// The local file is `AGENTS.local.md` (added after `AGENTS.md`, like `CLAUDE.local.md`), not
    /// Codex's `AGENTS.override.md` (which replaces `AGENTS.md`): one later-wins model for both
    /// conventions. Set [`local_file`](Self::local_file) to use another name.
    pub fn agents(env: &EnvVars) -> Self {
        Self::new("agents", "AGENTS.md", "AGENTS.local.md", env)
    }

    /// Builder-style: set the walk's top.
    pub fn with_project_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.project_root = Some(root.into());
        self
    }

    /// Builder-style: set the managed dir (`None` disables managed files).
    pub fn with_managed_root(mut self, root: Option<PathBuf>) -> Self {
        self.managed_root = root;
        self
    }

    /// Builder-style: set the user base (`None` disables user files).
    pub fn with_user_base(mut self, base: Option<PathBuf>) -> Self {
        self.user_base = base;
        self
    }

    /// Builder-style: set the home dir used for `~/` imports.
    pub fn with_home_dir(mut self, home: Option<PathBuf>) -> Self {
        self.home_dir = home;
        self
    }

    /// Builder-style: allow or refuse imports from outside the project.
    pub fn allow_outside_project(mut self, allow: bool) -> Self {
        self.allow_outside_project = allow;
        self
    }

    /// Whether `ext` (any case, no dot) is an allowed text extension.
    pub fn is_text_extension(&self, ext: &str) -> bool {
        self.text_extensions
            .iter()
            .any(|e| e.eq_ignore_ascii_case(ext))
    }
}
