//! Environment switches (`MEMLOOP_DISABLE_AUTO_MEMORY`, `MEMLOOP_MEMORY_DIR`, `MEMLOOP_HOME`,
//! `CLAUDE_CONFIG_DIR`, `MEMLOOP_TEAM_MEMORY`, `MEMLOOP_MEMORY_EXTRA_GUIDELINES`), read through core's injectable [`EnvVars`] (re-exported here).
//!
//! Library code never reads the process environment behind the caller's back: it takes an
//! [`EnvVars`], which hosts build with [`EnvVars::from_process`] and tests build from a map, so
//! tests never mutate the process environment.

pub use memloop_core::env::{EnvVars, is_truthy, parse_bool_env};

/// Turns memory off entirely (no index, recall, extraction or dream) when truthy.
pub const DISABLE_AUTO_MEMORY: &str = "MEMLOOP_DISABLE_AUTO_MEMORY";
/// Explicit memory dir, used verbatim (no `~` expansion); it wins over settings and the default.
pub const MEMORY_DIR: &str = "MEMLOOP_MEMORY_DIR";
/// memloop's config home (default `~/.memloop`).
pub const MEMLOOP_HOME: &str = "MEMLOOP_HOME";
/// Claude Code's config home (default `~/.claude`).
pub const CLAUDE_CONFIG_DIR: &str = "CLAUDE_CONFIG_DIR";
/// Private and team memory in one memory dir (its `team/` subdirectory is shared, with its
/// own index) when truthy: the memory section shows both indexes and the rule for which memory
/// goes where, and the extractor chooses between them.
pub const TEAM_MEMORY: &str = "MEMLOOP_TEAM_MEMORY";
/// Extra guidelines appended to the memory section of the system prompt (the host's or the
/// user's own rules about what to remember).
pub const MEMORY_EXTRA_GUIDELINES: &str = "MEMLOOP_MEMORY_EXTRA_GUIDELINES";
