//! # memloop-subagents
//!
//! Sub-agents: the model delegates a task to a child agent with its own system prompt, tools,
//! permission gate and conversation, through the `agent` tool ([`SubAgentTool`]), installed on an
//! agent's builder in one call ([`SubAgents::subagents`]); and the definitions of those agents,
//! in code ([`AgentDefinition`]) or read from Claude Code's markdown files ([`AgentDirs`]).
//!
//! - **One loop.** A sub-agent is a child run of core ([`memloop_core::child`]): the agent loop
//!   of the main agent and the forks on its own conversation: its task is the first user
//!   message, its exchange stays its own, and only its final text returns, as the tool result.
//! - **Foreground or background.** By default the tool call waits for the answer. With
//!   `background: true` it returns the run's id at once; the run is a tracked background task
//!   (the parent's `drain` waits for it) and its answer is attached to the parent's next user
//!   message as a system reminder (kind [`BACKGROUND_RESULTS_KIND`]), besides the
//!   `SubAgentFinished` event. Only the main agent starts background runs.
//! - **Bounded.** Each run has an iteration limit and a time limit ([`SubAgentConfig`]);
//!   cancelling the parent's turn cancels it; sub-agents nest at most
//!   [`SubAgentConfig::max_depth`] deep (default 1: a sub-agent cannot start another).
//! - **Visible.** Its events reach the host's sink stamped with
//!   [`EventAgent::SubAgent`](memloop_core::events::EventAgent::SubAgent) (name, id, depth),
//!   between `SubAgentStarted` and `SubAgentFinished` (core's events).
//! - **Extensible.** [`ChildExtension`]s adjust every sub-agent before it runs; the memory
//!   crate's agent memory gives a definition with `memory: project` its own memory dir and
//!   tools, and every other sub-agent none.
//!
//! **Definitions on disk** are markdown files in Claude Code's format, one agent per file:
//!
//! ```markdown
//! ---
//! name: code-reviewer          # any script; also its memory dir name
//! description: Reviews a change for bugs. Use after editing code.
//! tools: read_file, grep       # or a YAML list; absent = the parent's tools
//! model: inherit               # or a model name the host registered
//! memory: project              # user | project | local; absent = no memory
//! ---
//!
//! You are a careful code reviewer. ...
//! ```
//!
//! [`AgentDirs::standard`] reads `*.md` from the project's `.memloop/agents/` and
//! `.claude/agents/`, then the user's (`<MEMLOOP_HOME or ~/.memloop>/agents/`,
//! `<CLAUDE_CONFIG_DIR or ~/.claude>/agents/`); the first definition of a name wins, so the
//! project's win over the user's. A file that cannot be read or parsed is skipped with a warning
//! saying why ([`LoadedAgents::warnings`]); loading never fails. The `memory:` key is kept in
//! [`AgentDefinition::metadata`] under [`MEMORY_KEY`], for the extension that gives sub-agents
//! their memory (`memloop-memory`'s `AgentMemory`).
#![warn(missing_docs)]

mod definition;
mod inbox;
mod load;
mod parse;
mod tool;

pub use definition::{AgentDefinition, ChildExtension, ChildKit};
pub use inbox::BACKGROUND_RESULTS_KIND;
pub use load::{AgentDirs, DefinitionWarning, LoadedAgents, MAX_DEFINITION_BYTES};
pub use parse::MEMORY_KEY;
pub use tool::{SUBAGENT_TOOL, SubAgentConfig, SubAgentTool, SubAgents};
