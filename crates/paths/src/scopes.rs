//! Agent memory scopes: where a sub-agent type keeps its own memory dir.
//!
//! - user: `<base>/agent-memory/<type>/` (follows the user across projects),
//! - project: `<project>/.<app>/agent-memory/<type>/` (committed with the project),
//! - local: `<project>/.<app>/agent-memory-local/<type>/` (this checkout only, not committed).
//!
//! Each is an ordinary memory dir (index, topic files, tools); `:` in the agent type (plugin
//! namespaces such as `plugin:reviewer`) becomes `-`.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// Which agent memory scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentMemoryScope {
    /// `<base>/agent-memory/<type>/`.
    User,
    /// `<project>/.<app>/agent-memory/<type>/`, committed.
    Project,
    /// `<project>/.<app>/agent-memory-local/<type>/`, untracked.
    Local,
}

impl AgentMemoryScope {
    /// All scopes.
    pub const ALL: [AgentMemoryScope; 3] = [Self::User, Self::Project, Self::Local];

    /// The scope's name as an agent definition writes it (`memory: project`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
        }
    }
}

impl std::fmt::Display for AgentMemoryScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AgentMemoryScope {
    type Err = String;

    /// `user`, `project` or `local` (exactly, as Claude Code writes them).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s.trim())
            .ok_or_else(|| format!("unknown memory scope `{s}` (use user, project or local)"))
    }
}

/// A resolved agent memory dir.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentMemoryDir {
    /// The scope.
    pub scope: AgentMemoryScope,
    /// The agent type as used on disk (`:` replaced by `-`).
    pub agent_type: String,
    /// The memory dir.
    pub dir: PathBuf,
}

/// A rejected agent type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid agent type `{agent_type}`: {reason}")]
pub struct ScopeError {
    /// The agent type as given.
    pub agent_type: String,
    /// Why.
    pub reason: &'static str,
}

/// Resolves agent memory dirs for one user base and one project.
///
/// ```
/// use memloop_paths::{AgentMemoryScope, AgentMemoryScopes};
/// let scopes = AgentMemoryScopes::new("/home/u/.claude", "/src/app", ".claude");
/// let dir = scopes.resolve(AgentMemoryScope::Local, "plugin:reviewer").unwrap();
/// assert_eq!(dir.dir, std::path::Path::new("/src/app/.claude/agent-memory-local/plugin-reviewer"));
/// assert!(scopes.resolve(AgentMemoryScope::User, "../x").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentMemoryScopes {
    base: PathBuf,
    project_root: PathBuf,
    app_dir: String,
}

impl AgentMemoryScopes {
    /// Scopes under the user config `base` (`~/.claude`) and `project_root`, with the project's
    /// app dir name (`.claude`, `.agents`).
    pub fn new(
        base: impl Into<PathBuf>,
        project_root: impl Into<PathBuf>,
        app_dir: impl Into<String>,
    ) -> Self {
        Self {
            base: base.into(),
            project_root: project_root.into(),
            app_dir: app_dir.into(),
        }
    }

    /// The memory dir of `agent_type` in `scope`.
    pub fn resolve(
        &self,
        scope: AgentMemoryScope,
        agent_type: &str,
    ) -> Result<AgentMemoryDir, ScopeError> {
        let name = sanitize_agent_type(agent_type)?;
        let dir = self.root(scope).join(&name);
        Ok(AgentMemoryDir {
            scope,
            agent_type: name,
            dir,
        })
    }

    fn app_path(&self, sub: &str) -> PathBuf {
        self.project_root.join(&self.app_dir).join(sub)
    }

    /// The dir holding every agent type's memory dir in `scope` (it may not exist yet).
    pub fn root(&self, scope: AgentMemoryScope) -> PathBuf {
        match scope {
            AgentMemoryScope::User => self.base.join("agent-memory"),
            AgentMemoryScope::Project => self.app_path("agent-memory"),
            AgentMemoryScope::Local => self.app_path("agent-memory-local"),
        }
    }

    /// The agent memory dirs that exist in `scope`, sorted by agent type (unreadable or
    /// absent scope dirs give an empty list).
    pub fn existing(&self, scope: AgentMemoryScope) -> Vec<AgentMemoryDir> {
        let parent = self.root(scope);
        let Ok(entries) = std::fs::read_dir(&parent) else {
            return Vec::new();
        };
        let mut dirs: Vec<AgentMemoryDir> = entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|name| sanitize_agent_type(name).is_ok_and(|s| &s == name))
            .map(|agent_type| AgentMemoryDir {
                scope,
                dir: parent.join(&agent_type),
                agent_type,
            })
            .collect();
        dirs.sort_by(|a, b| a.agent_type.cmp(&b.agent_type));
        dirs
    }

    /// The project root.
    pub fn project_root(&self) -> &Path {
        &self.project_root
    }
}

/// The on-disk name of an agent type: `:` becomes `-`. Rejects empty names, path separators,
/// NUL, `..`, and a leading `.`.
pub fn sanitize_agent_type(agent_type: &str) -> Result<String, ScopeError> {
    let reject = |reason| {
        Err(ScopeError {
            agent_type: agent_type.to_owned(),
            reason,
        })
    };
    if agent_type.trim().is_empty() {
        return reject("it is empty");
    }
    if agent_type.contains(['/', '\\']) {
        return reject("it contains a path separator");
    }
    if agent_type.contains('\0') {
        return reject("it contains NUL");
    }
    if agent_type.contains("..") {
        return reject("it contains `..`");
    }
    if agent_type.starts_with('.') {
        return reject("it starts with `.`");
    }
    Ok(agent_type.replace(':', "-"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn bad_agent_types_are_rejected() {
        for bad in ["", "  ", "a/b", "a\\b", "..", "x..y", ".hidden", "nul\0"] {
            let err = sanitize_agent_type(bad).unwrap_err();
            assert!(err.to_string().contains("invalid agent type"), "{err}");
        }
        assert_eq!(sanitize_agent_type("a:b:c").unwrap(), "a-b-c");
    }

    #[test]
    fn sanitize_agent_type_example() {
        assert_eq!(
            sanitize_agent_type("ns:code-reviewer").unwrap(),
            "ns-code-reviewer"
        );
        assert!(sanitize_agent_type("a/b").is_err());
    }
}
