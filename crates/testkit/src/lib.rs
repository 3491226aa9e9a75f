//! # memloop-testkit
//!
//! What a test of a memloop agent, hook, selector, tool or store needs, public so you can test
//! your own parts without an API key or a network:
//!
//! - `ScriptedModel` (feature `model`, on by default): a deterministic model that replays the steps you queue or runs the rules
//!   you write, and records every request (it is also the offline demo's model, and says so);
//! - `hook_context` (feature `model`): a ready [`HookContext`](memloop_core::HookContext) for calling a hook;
//! - [`shared_data`], [`under_ci`], [`skip_unless_ci`]: tests that read external data sets or
//!   tools, skipped outside CI and failing under CI when what they need is missing;
//! - [`fifo`]: a named pipe where a file was expected.
//!
//! ```
//! # #[cfg(feature = "model")]
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use memloop_core::Agent;
//! use memloop_testkit::{ScriptStep, ScriptedModel};
//! use std::sync::Arc;
//!
//! let model = Arc::new(ScriptedModel::new().then(ScriptStep::text("Hi! How can I help?")));
//! let mut agent = Agent::builder(model.clone()).build();
//! assert_eq!(agent.run_turn("hello").await.unwrap().text, "Hi! How can I help?");
//! assert_eq!(model.requests().len(), 1);
//! # }
//! # #[cfg(not(feature = "model"))] fn main() {}
//! ```
#![warn(missing_docs)]

mod ci;
#[cfg(feature = "model")]
mod context;
mod fs;
#[cfg(feature = "model")]
mod scripted;

pub use ci::{shared_data, skip_unless_ci, under_ci};
#[cfg(feature = "model")]
pub use context::hook_context;
pub use fs::fifo;
#[cfg(feature = "model")]
pub use scripted::{ScriptStep, ScriptedModel};
