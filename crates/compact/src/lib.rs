//! # memloop-compact
//!
//! Keeps a long conversation inside the context window. The [`Compactor`]
//! implements `memloop_core::compaction::ContextCompactor`: when the conversation reaches the auto-compact
//! threshold it first tries **session-memory compaction** (the session notes become the summary,
//! the most recent 10K-40K tokens are kept verbatim) and falls back to an **LLM summary**
//! (then to a cut when not even the summary request fits); that order is the default
//! [`policy`], an ordered list of strategies a host can replace
//! ([`Compactor::with_strategies`]). It also offers opt-in [`repair`](mod@repair) passes for broken conversations, and each
//! strategy on its own in [`strategies`].
//!
//! Wiring session memory and compaction into an agent:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use memloop_compact::{CompactConfig, Compactor, repair::repair_fn};
//! use memloop_host::env::EnvVars;
//! use memloop_testkit::{ScriptStep, ScriptedModel};
//! use memloop_core::{Agent, AgentConfig};
//! use memloop_session_notes::{FileSessionNotes, SessionNotesConfig, SessionNotesHook};
//! use std::sync::Arc;
//!
//! // `<base>/projects/<slug>`, as resolved by the memory crate's path resolution.
//! let project_dir = std::env::temp_dir().join("memloop-doc/projects/demo");
//! let config = AgentConfig::default();
//! let notes = Arc::new(
//!     FileSessionNotes::new(SessionNotesConfig::new(&project_dir), &config.session_id).unwrap(),
//! );
//! let hook = Arc::new(SessionNotesHook::new(notes.clone()));
//! let compactor = Compactor::new(CompactConfig::for_model(200_000, 8_192).with_env(&EnvVars::from_process()))
//!     .with_session_notes(notes);
//! let model = ScriptedModel::new().then(ScriptStep::text("Hello!"));
//! let mut agent = Agent::builder(Arc::new(model))
//!     .config(config)
//!     .hook(hook) // notes updates after sampling (background, FIFO); baselines reset after compaction
//!     .compactor(Arc::new(compactor))
//!     .repair(repair_fn()) // optional: repair a broken conversation instead of failing
//!     .build();
//! assert_eq!(agent.run_turn("hi").await.unwrap().text, "Hello!");
//! # }
//! ```
#![warn(missing_docs)]

mod breaker;
mod compactor;
mod config;
mod keep;
mod notes;
mod notes_compaction;
pub mod policy;
pub mod repair;
mod rounds;
pub mod strategies;
mod summary;

pub use compactor::Compactor;
pub use config::{
    CompactConfig, ContextLevel, SessionMemoryCompactConfig, SummaryCompactConfig, Thresholds,
};
