//! Environment switches (`MEMLOOP_DISABLE_AUTO_MEMORY`, `MEMLOOP_MEMORY_DIR`, `MEMLOOP_HOME`,
//! `CLAUDE_CONFIG_DIR`, `MEMLOOP_TEAM_MEMORY`, `MEMLOOP_MEMORY_EXTRA_GUIDELINES`,
//! `MEMLOOP_REDACT_TRANSCRIPTS`), read through core's injectable [`EnvVars`] (re-exported here).
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
/// Redact credentials in session transcripts on disk too when truthy. Off by default: the JSONL
/// stays faithful (as Claude Code keeps it) and only what is read back (the `transcript_search`
/// tool, `memloop sessions show|search`) is redacted.
pub const REDACT_TRANSCRIPTS: &str = "MEMLOOP_REDACT_TRANSCRIPTS";

/// Whether [`REDACT_TRANSCRIPTS`] is on in `env`.
///
/// ```
/// use memloop_store::env::{EnvVars, redact_transcripts};
/// assert!(redact_transcripts(&EnvVars::from_pairs([("MEMLOOP_REDACT_TRANSCRIPTS", "1")])));
/// assert!(!redact_transcripts(&EnvVars::from_pairs([("MEMLOOP_REDACT_TRANSCRIPTS", "0")])));
/// assert!(!redact_transcripts(&EnvVars::from_pairs(Vec::<(String, String)>::new())));
/// ```
pub fn redact_transcripts(env: &EnvVars) -> bool {
    env.switch(REDACT_TRANSCRIPTS)
}
