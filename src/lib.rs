//! # memloop
//!
//! An embeddable Rust agent harness with pluggable memory. This facade re-exports the three
//! crates:
//!
//! - [`core`] (`memloop-core`): messages, the `Model` and `Tool` traits, the agent loop, hooks,
//!   forked agents, token counting;
//! - [`memory`] (`memloop-memory`): the memory dir, selectors and recall, extraction, session
//!   notes, consolidation, project instructions;
//! - [`compact`] (`memloop-compact`): compaction strategies and the invariant checker;
//! - `pg` (`memloop-pg`, feature `postgres`): team memory on PostgreSQL.
#![warn(missing_docs)]
#![doc = include_str!("../README.md")]

mod setup;

pub use memloop_compact as compact;
pub use memloop_core as core;
pub use memloop_memory as memory;
#[cfg(feature = "postgres")]
pub use memloop_pg as pg;

pub use memloop_core::{
    Agent, AgentBuilder, events::AgentEvent, message::Message, model::Model, tool::Tool,
};
pub use memloop_memory::store::MemoryStore;
pub use setup::{MemorySetup, SetupError};
