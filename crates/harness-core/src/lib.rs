//! # memloop-core
//!
//! The harness of memloop: Anthropic-shaped [`Message`]s, the [`Model`] and [`Tool`] traits, the
//! permission gate, the [`Agent`] loop with its hooks, [`ForkedAgent`]s, cached system-prompt
//! sections, token counting and the conversation invariant checker. Memory (`memloop-memory`)
//! and compaction (`memloop-compact`) plug into the hook points defined here.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use memloop_core::testing::{ScriptStep, ScriptedModel};
//! use memloop_core::{Agent, VecSink};
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
mod compaction;
mod engine;
mod error;
mod events;
mod fork;
mod hooks;
mod invariants;
mod message;
mod model;
mod prompt;
#[cfg(feature = "providers")]
pub mod providers;
pub mod testing;
mod tokens;
mod tool;
pub mod tools;

pub use agent::Agent;
pub use background::{BackgroundTasks, DrainReport};
pub use builder::{AgentBuilder, AgentConfig, RepairFn, TurnOutcome, TurnStop};
pub use compaction::{CompactionError, CompactionOutcome, CompactionTrigger, ContextCompactor};
pub use engine::truncate_utf8;
pub use error::AgentError;
pub use events::{AgentEvent, ChannelSink, EventSink, FanoutSink, NullSink, VecSink};
pub use fork::{ForkBase, ForkOutcome, ForkedAgent, ForkedAgentBuilder, fork_prefix};
pub use hooks::{
    Attachment, CompactionListener, HookContext, Hooks, PendingAttachment, PostSamplingHook,
    StopHook, TurnStartHook,
};
pub use invariants::{InvariantError, Violation, check_invariants, provider_view};
pub use message::{
    ContentBlock, MediaSource, Message, MessageId, MessageKind, MessageMeta, Role,
    ToolResultContent, Usage,
};
pub use model::{JsonSchema, Model, ModelError, ModelRequest, ModelResponse, StopReason};
pub use prompt::{StaticSection, SystemPrompt, SystemSection};
pub use tokens::{
    CharEstimator, ConversationTokens, Encoding, MEDIA_BLOCK_TOKENS, TiktokenCounter, TokenCounter,
    TokenizerError, count_conversation_uncached, estimate_message, estimate_messages,
};
pub use tool::{
    AgentKind, AllowAll, ContainsFn, PermissionDecision, PermissionGate, Tool, ToolCallRequest,
    ToolContext, ToolEffect, ToolOutput, ToolRegistry, ToolSpec, WriteScopeGate,
};

/// Re-exported so hosts and tools can use the same cancellation token type.
pub use tokio_util::sync::CancellationToken;
