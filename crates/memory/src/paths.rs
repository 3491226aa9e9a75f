//! Where a project's memory lives: the memory dir resolution (an explicit override, the
//! environment, local or user settings, or `<base>/projects/<slug>/memory`), the project root
//! (canonical git root, worktrees included), and the per-agent-type memory scopes.

pub use crate::project::{canonical_project_root, find_git_root, project_dir, project_slug};
pub use crate::resolver::{
    ALLOWED_DIRS_KEY, AUTO_MEMORY_KEY, CLAUDE_SETTINGS_KEY, ConfigFlavor, MemoryDirResolver,
    ResolutionRule, ResolvedMemoryDir, SETTINGS_KEY, validate_memory_dir,
};
pub use crate::scopes::{
    AgentMemoryDir, AgentMemoryScope, AgentMemoryScopes, ScopeError, sanitize_agent_type,
};
