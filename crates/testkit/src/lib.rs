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
//! - [`percentile`], [`process_cpu`], [`processes_cpu`]: a benchmark's figures (latency
//!   percentiles, the CPU time a server process or every PostgreSQL process has used);
//! - [`harmless_text`]: memory text that talks about passwords without holding one (the secret
//!   filter's worst case that it lets through);
//! - [`WORDS`] and [`Lcg`]: generated memory text, the same on every run and machine;
//! - `Echo` (feature `model`): a read-only tool named `echo` that answers with its input;
//! - `MapStore` (feature `store`, on memloop-store alone): an in-memory `MemoryStore` that
//!   passes the store conformance suite, and `WriteOutcome`, what the write rules say of a write;
//! - `Forwarding` (feature `store`): a wrapper that forwards every `MemoryStore` method to the
//!   store it wraps and records, holds (at a `Gate`) or fails the calls a test names, and can
//!   make the change feed carry texts;
//! - `FakeEmbedder` (feature `embed`, on memloop-core): a deterministic `Embedder` (hashed
//!   words, a concept table or a constant vector) that can fail, take time on tokio's clock or
//!   hold its queries at a `Gate`, and records what it embedded;
//! - `Gate` (feature `store` or `embed`): a pause point a test waits at and releases;
//! - `WaitForRecall` (feature `recall`, on memloop-recall): a tool that returns once recall has
//!   surfaced memories, with the event sink that wakes it;
//! - `Phoenix` (feature `phoenix`, on no memloop crate): a real Arize Phoenix server for a test,
//!   and its spans read back;
//! - `McpHttp` (feature `mcp-client`, on no memloop crate): an MCP client over Streamable HTTP,
//!   with or without sessions, cheap enough to load a server with; `run_load`, `read_back` and
//!   `read_your_writes`: a load run over it (a mix of the four tools, saves retried with their
//!   idempotency key), every acknowledged save read back, and the delay before a save answered
//!   by one server is found through another;
//! - `OtlpReceiver` (feature `otlp`, on no memloop crate): a loopback OTLP/HTTP receiver that
//!   keeps what an exporter sends it and decodes its spans;
//! - `json_server` and `embeddings_server` (feature `json-server`, on no memloop crate):
//!   loopback servers answering JSON from a closure, one in the OpenAI `/v1/embeddings` shape;
//! - `hub_server` (feature `hub-server`, on no memloop crate): a loopback server in the Hugging
//!   Face Hub's URL shape, for tests of model fetching.
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
#[cfg(feature = "embed")]
mod embedder;
#[cfg(feature = "store")]
mod forwarding;
mod fs;
#[cfg(any(feature = "store", feature = "embed"))]
mod gate;
#[cfg(feature = "hub-server")]
mod hub_server;
#[cfg(feature = "json-server")]
mod json_server;
#[cfg(feature = "mcp-client")]
mod load;
#[cfg(feature = "mcp-client")]
mod mcp_client;
mod measure;
#[cfg(feature = "otlp")]
mod otlp;
#[cfg(feature = "phoenix")]
mod phoenix;
#[cfg(feature = "recall")]
mod recall;
#[cfg(feature = "model")]
mod scripted;
#[cfg(feature = "store")]
mod store;
mod text;
#[cfg(feature = "warnings")]
mod warnings;
mod words;

pub use ci::{shared_data, skip_unless_ci, under_ci};
#[cfg(feature = "model")]
pub use context::{hook_context, tool_context};
#[cfg(feature = "model")]
pub use echo::Echo;
#[cfg(feature = "embed")]
pub use embedder::{ConceptTable, FakeEmbedder};
#[cfg(feature = "store")]
pub use forwarding::{Call, Calls, Forwarding, Hold, Method};
pub use fs::fifo;
#[cfg(any(feature = "store", feature = "embed"))]
pub use gate::Gate;
#[cfg(feature = "hub-server")]
pub use hub_server::{HubRequests, hub_server};
#[cfg(feature = "json-server")]
pub use json_server::{embeddings_server, json_server};
#[cfg(feature = "mcp-client")]
pub use load::{
    LoadOp, LoadPlan, LoadProgress, LoadReport, ReadBack, SavedEntry, read_back, read_your_writes,
    run_load,
};
#[cfg(feature = "mcp-client")]
pub use mcp_client::{McpCallError, McpHttp};
pub use measure::{percentile, process_cpu, processes_cpu};
#[cfg(feature = "otlp")]
pub use otlp::{OtlpReceiver, OtlpRequest, span_attr};
#[cfg(feature = "phoenix")]
pub use phoenix::Phoenix;
#[cfg(feature = "recall")]
pub use recall::WaitForRecall;
#[cfg(feature = "model")]
pub use scripted::{ScriptStep, ScriptedModel};
#[cfg(feature = "store")]
pub use store::{MapStore, WriteOutcome};
pub use text::harmless_text;
#[cfg(feature = "warnings")]
pub use warnings::Warnings;
pub use words::{Lcg, WORDS};
