//! memloop's memory for agents on [rig](https://docs.rs/rig-core) 0.44 (`rig-core` and its
//! agent runtime `rig-agent`), over memloop's loop-agnostic [`MemorySession`]: this crate holds
//! no memory logic, each part is rig glue around one call of the session.
//!
//! - [`memory_tools`]: memloop's memory tools as rig `DynamicTool`s
//!   ([`MemorySession::tools`], [`MemorySession::call_tool`]);
//! - [`MemoryHook`]: a rig `AgentHook` that puts memloop's recall next to the user's message
//!   before the run's first model call ([`MemorySession::recall`]) and hands each finished
//!   run's messages to memloop ([`MemorySession::after_turn`]: extraction, session notes);
//! - [`MemoryCompactor`]: memloop's compaction behind rig's `Compactor`
//!   ([`MemorySession::compact`]);
//! - [`TranscriptMemory`]: rig's conversation memory kept as a memloop session transcript;
//! - [`convert`]: rig's messages to memloop's and back, the one place that maps them.
//!
//! The crate's README has the wiring, and what rig cannot express with what happens instead.
//!
//! [`MemorySession`]: memloop::MemorySession
//! [`MemorySession::tools`]: memloop::MemorySession::tools
//! [`MemorySession::call_tool`]: memloop::MemorySession::call_tool
//! [`MemorySession::recall`]: memloop::MemorySession::recall
//! [`MemorySession::after_turn`]: memloop::MemorySession::after_turn
//! [`MemorySession::compact`]: memloop::MemorySession::compact

mod compactor;
pub mod convert;
mod hook;
mod tools;
mod transcript;

pub use compactor::MemoryCompactor;
pub use hook::{DEFAULT_RECALL_DEADLINE, MemoryHook};
pub use tools::memory_tools;
pub use transcript::TranscriptMemory;
