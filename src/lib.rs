//! # memloop
//!
//! An embeddable Rust agent harness with pluggable memory. A complete agent with memory, your own
//! recall policy and your own tool, runnable offline (a [`ScriptedModel`](core::testing::ScriptedModel)
//! stands in for the LLM and records what it was sent):
//!
//! ```
//! use memloop::core::testing::{ScriptStep, ScriptedModel};
//! use memloop::core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
//! use memloop::core::{Agent, events::AgentEvent};
//! use memloop::memory::recall::{RecallEvent, SelectionContext, Selector, SelectorError};
//! use memloop::memory::{env::EnvVars, paths::MemoryDirResolver, store::MemoryHeader};
//! use memloop::{MemorySetup, async_trait};
//! use serde_json::{Value, json};
//! use std::sync::Arc;
//! use tokio::sync::Notify;
//!
//! /// A recall policy: feedback memories only.
//! struct FeedbackOnly;
//!
//! #[async_trait]
//! impl Selector for FeedbackOnly {
//!     async fn select(&self, _query: &str, headers: &[MemoryHeader], ctx: &SelectionContext)
//!         -> Result<Vec<String>, SelectorError> {
//!         Ok(headers.iter()
//!             .filter(|h| h.rel_path.starts_with("feedback_"))
//!             .take(ctx.limit)
//!             .map(|h| h.rel_path.clone())
//!             .collect())
//!     }
//! }
//!
//! /// A tool. Recall never delays a turn; a scripted model answers at once, so this tool returns
//! /// once recall has surfaced its memories, which keeps the example deterministic.
//! struct Weather(Arc<Notify>);
//!
//! #[async_trait]
//! impl Tool for Weather {
//!     fn spec(&self) -> ToolSpec {
//!         ToolSpec {
//!             name: "weather".into(),
//!             description: "Today's weather.".into(),
//!             input_schema: json!({"type": "object", "properties": {}}),
//!             effect: ToolEffect::ReadOnly,
//!         }
//!     }
//!     async fn call(&self, _input: Value, _ctx: &ToolContext) -> ToolOutput {
//!         let wait = std::time::Duration::from_secs(30);
//!         match tokio::time::timeout(wait, self.0.notified()).await {
//!             Ok(()) => ToolOutput::ok("sunny, 24°C"),
//!             Err(_) => ToolOutput::error("recall surfaced nothing"),
//!         }
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // This example keeps memloop's home (normally `~/.memloop`) in a temp dir.
//! let tmp = tempfile::tempdir()?;
//! let env = EnvVars::from_pairs([("MEMLOOP_HOME", tmp.path().to_string_lossy())]);
//! let memory = MemorySetup::with_resolver(MemoryDirResolver::new(tmp.path()), env)?
//!     .selector(Arc::new(FeedbackOnly));
//!
//! // Session 1: the model saves a memory with the `memory_write` tool.
//! let model = ScriptedModel::new()
//!     .then(ScriptStep::tool("memory_write", json!({
//!         "topic": "feedback_units", "type": "feedback",
//!         "description": "the user wants temperatures in Celsius",
//!         "content": "Give temperatures in Celsius.",
//!     })))
//!     .then(ScriptStep::text("Noted."))
//!     .on_purpose("extractor", |_| Some(ScriptStep::text("Nothing new.")));
//! let mut agent = memory.attach(Agent::builder(Arc::new(model)))?.build();
//! agent.run_turn("Always give me temperatures in Celsius.").await?;
//! agent.drain(std::time::Duration::from_secs(60)).await;
//! let dir = &memory.memory_dir().ok_or("memory is switched off")?.dir;
//! assert!(dir.join("feedback_units.md").is_file());
//!
//! // Session 2: a new agent; recall surfaces the memory next to the user's message.
//! let recalled = Arc::new(Notify::new());
//! let signal = recalled.clone();
//! let on_event = move |e: AgentEvent| {
//!     if matches!(e.extension(), Some(RecallEvent::MemoriesSurfaced { .. })) {
//!         signal.notify_one();
//!     }
//! };
//! let model = ScriptedModel::new()
//!     .then(ScriptStep::tool("weather", json!({})))
//!     .then(ScriptStep::text("Sunny, 24°C."))
//!     .on_purpose("extractor", |_| Some(ScriptStep::text("Nothing new.")));
//! let builder = Agent::builder(Arc::new(model.clone()))
//!     .tool(Arc::new(Weather(recalled)))
//!     .events(Arc::new(on_event));
//! let mut agent = memory.attach(builder)?.build();
//! let outcome = agent.run_turn("What's the weather like today?").await?;
//! assert_eq!(outcome.text, "Sunny, 24°C.");
//! let last = model.requests_for("main").pop().ok_or("no request")?;
//! assert!(last.messages.iter().any(|m| m.text().contains("Give temperatures in Celsius.")));
//! # Ok(()) }
//! ```
//!
//! The crate re-exports the library crates:
//!
//! - [`core`] (`memloop-core`): messages, the `Model` and `Tool` traits, the agent loop, hooks,
//!   forked agents, token counting, the invariant checker;
//! - [`memory`] (`memloop-memory`): the memory dir, selectors and recall, extraction,
//!   consolidation, project instructions, and the session notes (`memloop-session-notes`,
//!   re-exported as [`memory::session_notes`]);
//! - [`compact`] (`memloop-compact`): compaction strategies and conversation repair;
//! - `pg` (`memloop-pg`, feature `postgres`): team memory on PostgreSQL;
//! - `candle` (`memloop-candle`, feature `candle`): text embeddings from a local BERT or MPNet
//!   sentence-transformers model, run in-process on CPU;
//!
//! plus [`MemorySetup`] (memory wired into an [`AgentBuilder`] in one call) and the
//! [`async_trait`](macro@async_trait) attribute the traits are implemented with.
//!
//! ## Every trait, with an example
//!
//! | trait | example |
//! |---|---|
//! | [`Model`](core::model::Model) | [`ScriptedModel`](core::testing::ScriptedModel), and the trait's docs |
//! | [`Tool`](core::tool::Tool) | above (`Weather`), and the trait's docs |
//! | [`PermissionGate`](core::tool::PermissionGate) | the trait's docs; [`WriteScopeGate`](core::tool::WriteScopeGate) |
//! | [`TokenCounter`](core::tokens::TokenCounter) | [`CharEstimator`](core::tokens::CharEstimator), [`TiktokenCounter`](core::tokens::TiktokenCounter) |
//! | [`SystemSection`](core::prompt::SystemSection) | the trait's docs |
//! | [`Hook`](core::Hook) | the trait's docs |
//! | [`EventSink`](core::events::EventSink) | above (`on_event`: any `Fn(AgentEvent)` is a sink); [`VecSink`](core::events::VecSink) |
//! | [`ContextCompactor`](core::compaction::ContextCompactor) | [`Compactor`](compact::Compactor) |
//! | [`MemoryStore`](memory::store::MemoryStore) | [`FileMemoryStore`](memory::store::FileMemoryStore) |
//! | [`Selector`](memory::recall::Selector) | above (`FeedbackOnly`), and the trait's docs |
//! | [`Extractor`](memory::extract::Extractor) | the trait's docs; [`ForkedExtractor`](memory::extract::ForkedExtractor) |
//! | [`SessionNotes`](memory::session_notes::SessionNotes) | [`FileSessionNotes`](memory::session_notes::FileSessionNotes) |
//!
//! The README follows.
#![warn(missing_docs)]
#![doc = include_str!("../README.md")]

mod setup;

/// The guides under `docs/`, compiled and run as doc tests (`cargo test --doc -p memloop
/// --all-features`) so their Rust examples stay true; not part of the API.
#[cfg(doctest)]
mod guides {
    #[doc = include_str!("../docs/memory-on-disk.md")]
    pub struct MemoryOnDisk;
    #[doc = include_str!("../docs/recall.md")]
    pub struct Recall;
    #[doc = include_str!("../docs/recall-evaluation.md")]
    pub struct RecallEvaluation;
    #[doc = include_str!("../docs/extraction-and-consolidation.md")]
    pub struct ExtractionAndConsolidation;
    #[doc = include_str!("../docs/compaction.md")]
    pub struct Compaction;
    #[doc = include_str!("../docs/transcripts.md")]
    pub struct Transcripts;
    #[doc = include_str!("../docs/sub-agents.md")]
    pub struct SubAgents;
    #[doc = include_str!("../docs/instructions.md")]
    pub struct Instructions;
    #[doc = include_str!("../docs/providers.md")]
    pub struct Providers;
    #[doc = include_str!("../docs/observability.md")]
    pub struct Observability;
    #[doc = include_str!("../docs/cli.md")]
    pub struct Cli;
    #[doc = include_str!("../docs/mcp.md")]
    pub struct Mcp;
    #[doc = include_str!("../docs/team.md")]
    pub struct Team;
    #[doc = include_str!("../docs/configuration.md")]
    pub struct Configuration;
    #[doc = include_str!("../docs/benchmarks.md")]
    pub struct Benchmarks;
    #[doc = include_str!("../docs/limitations.md")]
    pub struct Limitations;
    #[doc = include_str!("../docs/development.md")]
    pub struct Development;
}

/// The attribute macro the async traits ([`Tool`], [`Model`], `Selector`, `Hook`, ...) are
/// implemented with, re-exported so implementing them needs no extra dependency.
pub use async_trait::async_trait;
#[cfg(feature = "candle")]
pub use memloop_candle as candle;
pub use memloop_compact as compact;
pub use memloop_core as core;
#[cfg(feature = "postgres")]
pub use memloop_pg as pg;
pub use memloop_recall as recall;
pub use memloop_store as store;
pub use memloop_text as text;

pub use memloop_core::{
    Agent, AgentBuilder, events::AgentEvent, message::Message, model::Model, tool::Tool,
};
pub use memloop_store::MemoryStore;
pub use setup::{MemorySetup, SetupError};

/// Everything about memory in one place: the memory dir ([`store`](memory::store), the
/// `memloop-store` crate), where it lives ([`paths`](memory::paths)), [`recall`](memory::recall)
/// (`memloop-recall`, with `memloop-text`'s analyzer), project
/// [`instructions`](memory::instructions) (`memloop-instructions`), and what writes memories
/// (`memloop-memory`: tools, extraction, consolidation, prompt, transcripts, sub-agents).
pub mod memory {
    pub use memloop_memory::*;

    /// The environment switches (`MEMLOOP_*`).
    pub use memloop_store::env;

    /// Project instructions: the `memloop-instructions` crate.
    pub use memloop_instructions as instructions;

    /// The memory store: the [`MemoryStore`](store::MemoryStore) trait, the file backend, the
    /// memory types and the rules every write obeys (the `memloop-store` crate).
    pub mod store {
        pub use memloop_store::{
            ChangeCursor, Changes, CheckedWrite, ContainmentGate, Durability, ExpectedVersion,
            FileMemoryStore, Headers, INDEX_FILE, IndexCaps, IndexEntry, LoadedIndex, LocalBases,
            LocalDir, LocalPurpose, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryPath,
            MemoryScope, MemoryStore, MemoryType, REDACTED_PREFIX, ScanCache, ScanChange,
            ScanConfig, ScanUpdate, SecretFilter, StoreConfig, StoreDescription, StoreLocation,
            TEAM_DIR, VersionedWrite, WriteLimits, WriteMode, WriteReport, append_to_existing,
            canonical_memory_text, content_version, format_entry_line, load_capped, redact_secrets,
            title_file_stem, title_key, topic_to_rel_path, validate_rel_path,
        };
    }

    /// Where a project's memory lives: the memory dir resolution, the project root and the
    /// per-agent-type memory scopes (from the `memloop-store` crate).
    pub mod paths {
        pub use memloop_store::{
            AgentMemoryDir, AgentMemoryScope, AgentMemoryScopes, ConfigFlavor, MemoryDirResolver,
            ResolutionRule, ResolvedMemoryDir, ScopeError, canonical_project_root, project_dir,
            project_slug,
        };
    }

    /// Recall: the `memloop-recall` crate, with the text analyzer (`memloop-text`) it searches
    /// with.
    pub mod recall {
        pub use memloop_recall::*;
        pub use memloop_text::{
            Analyzer, Script, UnknownLanguage, detect_language, fold_accents, normalize, tokens,
            words,
        };
    }
}
