//! # memloop-testkit
//!
//! What a test of a memloop agent, hook, selector, tool or store needs, public so you can test
//! your own parts without an API key or a network:
//!
//! - `ScriptedModel` (feature `model`, on by default): a deterministic model that replays the steps you queue or runs the rules
//!   you write, and records every request (it is also the offline demo's model, and says so);
//! - `hook_context` (feature `model`): a ready [`HookContext`](memloop_core::HookContext) for calling a hook;
//! - `tool_context` (feature `model`): a ready `ToolContext` for calling a tool;
//! - [`shared_data`], [`under_ci`], [`skip_unless_ci`]: tests that read external data sets or
//!   tools, skipped outside CI and failing under CI when what they need is missing;
//! - [`fifo`]: a named pipe where a file was expected;
//! - [`WORDS`] and [`Lcg`]: generated memory text, the same on every run and machine;
//! - `Echo` (feature `model`): a read-only tool named `echo` that answers with its input;
//! - `MapStore` (feature `store`, on memloop-store alone): an in-memory `MemoryStore` that
//!   passes the store conformance suite, and `WriteOutcome`, what the write rules say of a write;
//! - `WaitForRecall` (feature `recall`, on memloop-recall): a tool that returns once recall has
//!   surfaced memories, with the event sink that wakes it;
//! - `Phoenix` (feature `phoenix`, on no memloop crate): a real Arize Phoenix server for a test,
//!   and its spans read back;
//! - `McpHttp` (feature `mcp-client`, on no memloop crate): an MCP client over Streamable HTTP,
//!   with or without sessions, cheap enough to load a server with.
//!
//! Each feature pulls only its own area's crates: a store backend's tests take `store` without
//! building the agent loop.
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
#[cfg(feature = "model")]
mod echo;
mod fs;
#[cfg(feature = "mcp-client")]
mod mcp_client;
#[cfg(feature = "phoenix")]
mod phoenix;
#[cfg(feature = "recall")]
mod recall;
#[cfg(feature = "model")]
mod scripted;
#[cfg(feature = "store")]
mod store;
mod words;

pub use ci::{shared_data, skip_unless_ci, under_ci};
#[cfg(feature = "model")]
pub use context::{hook_context, tool_context};
#[cfg(feature = "model")]
pub use echo::Echo;
pub use fs::fifo;
#[cfg(feature = "mcp-client")]
pub use mcp_client::{McpCallError, McpHttp};
#[cfg(feature = "phoenix")]
pub use phoenix::Phoenix;
#[cfg(feature = "recall")]
pub use recall::WaitForRecall;
#[cfg(feature = "model")]
pub use scripted::{ScriptStep, ScriptedModel};
#[cfg(feature = "store")]
pub use store::{MapStore, WriteOutcome};
pub use words::{Lcg, WORDS};
