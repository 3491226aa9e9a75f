//! # memloop-core
//!
//! The harness of memloop: the [`Agent`] loop and the pieces it is made of. Memory
//! (`memloop-memory`) and compaction (`memloop-compact`) plug into it through one [`Hook`] trait
//! and the [`ContextCompactor`](compaction::ContextCompactor) trait.
//!
//! The crate root holds the agent itself; everything else lives in a module named for what it is:
//!
//! | module | what it holds |
//! |---|---|
//! | [`message`] | Anthropic-shaped [`Message`](message::Message)s, content blocks, usage |
//! | [`model`] | the [`Model`](model::Model) trait (whole or streamed calls), requests and their options, responses, [`ModelError`](model::ModelError) |
//! | [`tool`] | the [`Tool`](tool::Tool) trait, the registry, permission gates |
//! | [`hooks`] | the [`Hook`] trait and turn-start attachments |
//! | [`events`] | typed [`AgentEvent`](events::AgentEvent)s (deltas, terminal events) with their origin, and sinks for hosts |
//! | [`fork`] | forked sub-agents that share the parent's prompt prefix |
//! | [`child`] | child agents: a tool call runs an agent of its own (the one loop, a conversation of its own) from the calling agent, as the `agent` tool of `memloop-subagents` does |
//! | [`compaction`] | the compactor interface the loop calls before each request |
//! | [`prompt`] | cached system-prompt sections |
//! | [`tokens`] | token counters and the conversation size rule |
//! | [`invariants`] | the API invariant checker run before every request |
//! | [`window`] | the shared [`ContextWindow`](window::ContextWindow) and output budgets |
//! | [`fit`] | fitting messages into a token budget: middle cuts, dropping oldest rounds |
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use memloop_testkit::{ScriptStep, ScriptedModel};
//! use memloop_core::Agent;
//! use memloop_core::events::VecSink;
//! use std::sync::Arc;
//!
//! // A scripted model: deterministic, offline, and honest about it.
//! let model = ScriptedModel::new().then(ScriptStep::text("Hi! How can I help?"));
//! let events = VecSink::default();
//! let mut agent = Agent::builder(Arc::new(model)).events(Arc::new(events.clone())).build();
//! let out = agent.run_turn("hello").await.unwrap();
//! assert_eq!(out.text, "Hi! How can I help?");
//! assert!(!events.events().is_empty());
//! # }
//! ```
#![warn(missing_docs)]

mod agent;
mod background;
mod builder;
mod caller;
pub mod child;
pub mod clearing;
pub mod compaction;
mod compaction_strategy;
mod config;
mod context;
pub mod embed;
mod error;
pub mod events;
pub mod fit;
pub mod fork;
mod hook;
pub mod hooks;
pub mod invariants;
mod loop_step;
pub mod message;
pub mod model;
pub mod prompt;
pub mod telemetry;
pub mod tokens;
pub mod tool;
mod turn_loop;
pub mod window;

pub use agent::{Agent, TurnOutcome, TurnStop};
pub use background::{BackgroundTasks, DrainReport};
pub use builder::AgentBuilder;
pub use config::AgentConfig;
pub use context::HookContext;
pub use error::AgentError;
pub use hook::Hook;

/// Re-exported so hosts and tools can use the same cancellation token type.
pub use tokio_util::sync::CancellationToken;
