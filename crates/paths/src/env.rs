//! Environment switches (`MEMLOOP_DISABLE_AUTO_MEMORY`, `MEMLOOP_SIMPLE`, `MEMLOOP_MEMORY_DIR`, `MEMLOOP_HOME`,
//! `CLAUDE_CONFIG_DIR`, `MEMLOOP_TEAM_MEMORY`, `MEMLOOP_MEMORY_EXTRA_GUIDELINES`,
//! `MEMLOOP_REDACT_TRANSCRIPTS`), read through the injectable [`EnvVars`] of `memloop-host`.
//!
//! Library code reads the environment through an [`EnvVars`], which hosts build with
//! [`EnvVars::from_process`] and tests build from a map, so tests never mutate the process
//! environment. The constructors that take none say that they read the process environment
//! ([`MemoryDirResolver::new`](crate::MemoryDirResolver::new), the default
//! [`MemoryStore::local_dir`](memloop_store::MemoryStore::local_dir)), and each can be given one instead
//! ([`MemoryDirResolver::env`](crate::MemoryDirResolver::env); a backend overrides `local_dir`
//! with [`LocalBases::local_dir`](memloop_store::LocalBases::local_dir) over bases from its own).

use memloop_host::env::EnvVars;

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
/// Bare mode: memory off entirely, like [`DISABLE_AUTO_MEMORY`], when truthy.
pub const SIMPLE: &str = "MEMLOOP_SIMPLE";
/// Claude Code's bare mode, honoured in Claude Code's layout: memory off when truthy.
pub const CLAUDE_CODE_SIMPLE: &str = "CLAUDE_CODE_SIMPLE";
/// Claude Code's switch for automatic memory, honoured in Claude Code's layout: memory off when
/// truthy.
pub const CLAUDE_CODE_DISABLE_AUTO_MEMORY: &str = "CLAUDE_CODE_DISABLE_AUTO_MEMORY";

/// Claude Code's extra memory guidelines, honoured in Claude Code's layout when
/// [`MEMORY_EXTRA_GUIDELINES`] is not set.
pub const CLAUDE_COWORK_MEMORY_EXTRA_GUIDELINES: &str = "CLAUDE_COWORK_MEMORY_EXTRA_GUIDELINES";

/// Claude Code's explicit memory dir, honoured in Claude Code's layout after
/// [`MEMORY_DIR`]: used verbatim, like it.
pub const CLAUDE_COWORK_MEMORY_PATH_OVERRIDE: &str = "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE";

/// The variable that turns memory off in `env`, if any: [`DISABLE_AUTO_MEMORY`] or [`SIMPLE`]
/// always, and with `claude_layout` (Claude Code's layout) also Claude Code's own
/// [`CLAUDE_CODE_DISABLE_AUTO_MEMORY`] and [`CLAUDE_CODE_SIMPLE`]. The one place that decides
/// "memory enabled" from the environment.
///
/// ```
/// use memloop_host::env::EnvVars;
/// use memloop_paths::env::memory_switched_off_by;
/// let bare = EnvVars::from_pairs([("CLAUDE_CODE_SIMPLE", "1")]);
/// assert_eq!(memory_switched_off_by(&bare, true), Some("CLAUDE_CODE_SIMPLE"));
/// assert_eq!(memory_switched_off_by(&bare, false), None);
/// let bare = EnvVars::from_pairs([("MEMLOOP_SIMPLE", "1")]);
/// assert_eq!(memory_switched_off_by(&bare, false), Some("MEMLOOP_SIMPLE"));
/// ```
pub fn memory_switched_off_by(env: &EnvVars, claude_layout: bool) -> Option<&'static str> {
    let ours = [DISABLE_AUTO_MEMORY, SIMPLE];
    let claude = [CLAUDE_CODE_DISABLE_AUTO_MEMORY, CLAUDE_CODE_SIMPLE];
    let checked = if claude_layout { &claude[..] } else { &[][..] };
    ours.into_iter()
        .chain(checked.iter().copied())
        .find(|name| env.switch(name))
}

/// Whether memory is on in `env` for memloop's own variables ([`memory_switched_off_by`]
/// without Claude Code's layout).
pub fn memory_enabled(env: &EnvVars) -> bool {
    memory_switched_off_by(env, false).is_none()
}

/// Redact credentials in session transcripts on disk too when truthy. Off by default: the JSONL
/// stays faithful (as Claude Code keeps it) and only what is read back (the `transcript_search`
/// tool, `memloop sessions show|search`) is redacted.
pub const REDACT_TRANSCRIPTS: &str = "MEMLOOP_REDACT_TRANSCRIPTS";

/// Whether [`REDACT_TRANSCRIPTS`] is on in `env`.
///
/// ```
/// use memloop_host::env::EnvVars;
/// use memloop_paths::env::redact_transcripts;
/// assert!(redact_transcripts(&EnvVars::from_pairs([("MEMLOOP_REDACT_TRANSCRIPTS", "1")])));
/// assert!(!redact_transcripts(&EnvVars::from_pairs([("MEMLOOP_REDACT_TRANSCRIPTS", "0")])));
/// assert!(!redact_transcripts(&EnvVars::from_pairs(Vec::<(String, String)>::new())));
/// ```
pub fn redact_transcripts(env: &EnvVars) -> bool {
    env.switch(REDACT_TRANSCRIPTS)
}
