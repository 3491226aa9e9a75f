//! Where a project's memory lives: the memory dir resolution (an explicit override, the
//! environment, local or user settings, or `<base>/projects/<slug>/memory`), the project root
//! (canonical git root, worktrees included), and the per-agent-type memory scopes.

pub use crate::project::{canonical_project_root, project_dir, project_slug};
pub use crate::resolver::{ConfigFlavor, MemoryDirResolver, ResolutionRule, ResolvedMemoryDir};
pub use crate::scopes::{AgentMemoryDir, AgentMemoryScope, AgentMemoryScopes, ScopeError};
