//! # memloop-paths
//!
//! Where a project's memory lives: the memory dir a project resolves to
//! ([`MemoryDirResolver`]: an override, `MEMLOOP_MEMORY_DIR`, the settings files, or the slug of
//! the project's canonical root under `MEMLOOP_HOME`, in memloop's or Claude Code's layout), the
//! project's root ([`canonical_project_root`]: its git root, a worktree's main checkout), the
//! per-agent memory scopes, and the environment switches ([`env`](mod@env)). No store: any backend
//! (`memloop-files`' memory dir, a database) is opened for what this resolves.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop_host::env::EnvVars;
//! use memloop_paths::{MemoryDirResolver, ResolutionRule};
//! let home = tempfile::tempdir()?;
//! let project = tempfile::tempdir()?;
//! let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_string_lossy().into_owned())]);
//! let resolved = MemoryDirResolver::new(project.path()).env(env).resolve()?;
//! assert_eq!(resolved.rule, ResolutionRule::Default);
//! assert!(resolved.dir.starts_with(home.path()));
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod env;

mod project;
mod resolver;
mod scopes;

pub use project::{canonical_project_root, origin_without_credentials, project_dir, project_slug};
pub use resolver::{ConfigFlavor, MemoryDirResolver, ResolutionRule, ResolvedMemoryDir};
pub use scopes::{
    AgentMemoryDir, AgentMemoryScope, AgentMemoryScopes, ScopeError, sanitize_agent_type,
};
