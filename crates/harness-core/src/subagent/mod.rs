//! Sub-agents: the model delegates a task to a child agent with its own system prompt, tools,
//! permission gate and conversation, through the `agent` tool ([`SubAgentTool`]).
//!
//! - **One loop.** A sub-agent runs the agent loop of the main agent and the forks
//!   (`turn_loop::run_loop`) on its own transcript: its task is the first user message, its
//!   exchange stays its own, and only its final text returns, as the tool result.
//! - **Foreground or background.** By default the tool call waits for the answer. With
//!   `background: true` it returns the run's id at once; the run is a tracked background task
//!   (the parent's `drain` waits for it) and its answer is attached to the parent's next user
//!   message as a system reminder (kind [`BACKGROUND_RESULTS_KIND`]), besides the
//!   `SubAgentFinished` event. Only the main agent starts background runs.
//! - **Bounded.** Each run has an iteration limit and a time limit ([`SubAgentConfig`]);
//!   cancelling the parent's turn cancels it; sub-agents nest at most
//!   [`SubAgentConfig::max_depth`] deep (default 1: a sub-agent cannot start another).
//! - **Visible.** Its events reach the host's sink stamped with
//!   [`EventAgent::SubAgent`](crate::events::EventAgent::SubAgent) (name, id, depth), between
//!   `SubAgentStarted` and `SubAgentFinished`.
//! - **Extensible.** [`ChildExtension`]s adjust every sub-agent before it runs; the memory
//!   crate's agent memory gives a definition with `memory: project` its own memory dir and
//!   tools, and every other sub-agent none.

mod definition;
mod inbox;
mod run;
mod tool;

pub use definition::{AgentDefinition, ChildExtension, ChildKit};
pub use inbox::BACKGROUND_RESULTS_KIND;
pub use tool::{SUBAGENT_TOOL, SubAgentConfig, SubAgentTool};
