//! # memloop
//!
//! An embeddable Rust agent harness with pluggable memory. A complete agent with memory, your own
//! recall policy and your own tool, runnable offline (a [`ScriptedModel`](testkit::ScriptedModel)
//! stands in for the LLM and records what it was sent):
//!
//! ```
//! use memloop::testkit::{ScriptStep, ScriptedModel};
//! use memloop::core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
//! use memloop::core::{Agent, events::AgentEvent};
//! use memloop::memory::recall::{RecallEvent, SelectionContext, SelectorError};
//! use memloop::Selector;
//! use memloop::host::env::EnvVars;
//! use memloop::memory::{paths::MemoryDirResolver, store::MemoryHeader};
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
//! The four memory traits are at the crate root, under these names for good: [`MemoryStore`]
//! (where memories live), [`Selector`] (what recall surfaces), [`Extractor`] (what writes
//! memories after a turn) and [`SessionMemory`] (the notes compaction summarises with);
//! [`MemorySetup`] takes any of each. Beside them, the crate re-exports the library crates:
//!
//! - [`core`] (`memloop-core`): messages, the `Model` and `Tool` traits, the agent loop, hooks,
//!   forked agents, token counting, the invariant checker;
//! - [`host`] (`memloop-host`): the environment ([`EnvVars`](host::env::EnvVars)), regular-file
//!   reads, lexical paths;
//! - [`text`] (`memloop-text`): the text analyzer, UTF-8 cuts, templates, globs, frontmatter;
//! - [`tools`] (`memloop-tools`): read, glob, grep, write, edit and shell tools;
//! - [`testkit`] (`memloop-testkit`): a scripted model for tests and the offline demo;
//! - [`subagents`] (`memloop-subagents`): the `agent` tool and agent definitions;
//! - [`memory`]: everything about memory, gathered from its crates (`memloop-store`, the
//!   contract every backend keeps; `memloop-files`, the memory dir; `memloop-paths`, where it
//!   lives; `memloop-secrets`, `memloop-recall`, `memloop-instructions`, `memloop-memory`,
//!   `memloop-transcripts`, `memloop-session-notes`);
//! - [`compact`] (`memloop-compact`): compaction strategies and conversation repair;
//! - `pg` (`memloop-pg`, feature `postgres`): team memory on PostgreSQL;
//! - `candle` (`memloop-candle`, feature `candle`): text embeddings from a local BERT or MPNet
//!   sentence-transformers model, run in-process on CPU;
//! - `providers` (`memloop-providers`, feature `providers`): Anthropic and OpenAI-compatible HTTP
//!   models and embeddings;
//! - `otel` (`memloop-otel`, feature `otel`): OTLP export of the loop's spans and metrics;
//!
//! plus [`MemorySetup`] (memory wired into an [`AgentBuilder`](core::AgentBuilder) in one call)
//! and the [`async_trait`](macro@async_trait) attribute the traits are implemented with. Every
//! public item has one path in this crate.
//!
//! ## Every trait, with an example
//!
//! | trait | example |
//! |---|---|
//! | [`Model`](core::model::Model) | [`ScriptedModel`](testkit::ScriptedModel), and the trait's docs |
//! | [`Tool`](core::tool::Tool) | above (`Weather`), and the trait's docs |
//! | [`PermissionGate`](core::tool::PermissionGate) | the trait's docs; [`WriteScopeGate`](core::tool::WriteScopeGate) |
//! | [`TokenCounter`](core::tokens::TokenCounter) | [`CharEstimator`](core::tokens::CharEstimator), [`TiktokenCounter`](core::tokens::TiktokenCounter) |
//! | [`SystemSection`](core::prompt::SystemSection) | the trait's docs |
//! | [`Hook`](core::Hook) | the trait's docs |
//! | [`EventSink`](core::events::EventSink) | above (`on_event`: any `Fn(AgentEvent)` is a sink); [`VecSink`](core::events::VecSink) |
//! | [`ContextCompactor`](core::compaction::ContextCompactor) | [`Compactor`](compact::Compactor) |
//! | [`MemoryStore`] | [`FileMemoryStore`](memory::files::FileMemoryStore) |
//! | [`Selector`] | above (`FeedbackOnly`), and the trait's docs |
//! | [`Extractor`] | the trait's docs; [`ForkedExtractor`](memory::extract::ForkedExtractor) |
//! | [`SessionMemory`] | [`FileSessionNotes`](memory::session_notes::FileSessionNotes) |
//!
//! The README follows.
#![warn(missing_docs)]
#![doc = include_str!("../README.md")]

mod session;
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

/// The attribute macro the async traits ([`Tool`](core::tool::Tool),
/// [`Model`](core::model::Model), [`Selector`], [`Hook`](core::Hook), ...) are implemented
/// with, re-exported so implementing them needs no extra dependency.
pub use async_trait::async_trait;
#[cfg(feature = "candle")]
pub use memloop_candle as candle;
pub use memloop_compact as compact;
pub use memloop_core as core;
pub use memloop_host as host;
#[cfg(feature = "otel")]
pub use memloop_otel as otel;
#[cfg(feature = "postgres")]
pub use memloop_pg as pg;
#[cfg(feature = "providers")]
pub use memloop_providers as providers;
/// Sub-agents: the `agent` tool and agent definitions (the `memloop-subagents` crate); their
/// memory is [`memory::agent_memory`].
pub use memloop_subagents as subagents;
pub use memloop_testkit as testkit;
pub use memloop_text as text;
pub use memloop_tools as tools;

// The four memory traits, the public contract: here and nowhere else in the facade.
/// What writes memories after a turn (`memloop-memory`):
/// [`ForkedExtractor`](memory::extract::ForkedExtractor) by default.
pub use memloop_memory::extract::Extractor;
/// The per-session notes compaction summarises with (`memloop-session-notes`):
/// [`FileSessionNotes`](memory::session_notes::FileSessionNotes) by default.
pub use memloop_memory::session_notes::SessionMemory;
/// What recall surfaces (`memloop-recall`): the memories relevant to a message.
pub use memloop_recall::Selector;
/// Where memories live (`memloop-store`, the contract every backend keeps; its rules are stated
/// on the trait): scan, read, write, delete, the index and the change feed.
/// [`FileMemoryStore`](memory::files::FileMemoryStore) is the memory dir on disk.
pub use memloop_store::MemoryStore;

pub use session::{MemorySession, Recalled, SessionError};
pub use setup::{MemorySetup, MissingCapability, SetupError};

/// Everything about memory in one place (each item under one path; the four traits
/// [`MemoryStore`], [`Selector`], [`Extractor`] and [`SessionMemory`] are at the crate root):
/// the contract of a memory backend ([`store`](memory::store), the `memloop-store` crate), the
/// memory dir ([`files`](memory::files), `memloop-files`), where it lives
/// ([`paths`](memory::paths), `memloop-paths`), its switches ([`env`](memory::env)), the credential filter
/// ([`secrets`](memory::secrets), `memloop-secrets`), [`recall`](memory::recall)
/// (`memloop-recall`), project
/// [`instructions`](memory::instructions) (`memloop-instructions`), the
/// [`session_notes`](memory::session_notes) (`memloop-session-notes`), the session
/// [`transcripts`](memory::transcripts) (`memloop-transcripts`), and what writes memories
/// (`memloop-memory`: tools, extraction, consolidation, prompt, the memory of sub-agents).
pub mod memory {
    pub use memloop_memory::{MemoryEvent, WriterError, agent_memory, dream, prompt, tools};

    /// Project instructions: the `memloop-instructions` crate.
    pub use memloop_instructions as instructions;

    /// Session transcripts (JSONL in Claude Code's layout): the writer hook, reading, resuming,
    /// the bounded search and its tool; the `memloop-transcripts` crate.
    pub use memloop_transcripts as transcripts;

    /// The credential filter every memory writer runs and the redaction of what leaves the
    /// process: the `memloop-secrets` crate.
    pub use memloop_secrets as secrets;

    /// The environment switches (`MEMLOOP_*`) of memory; the variables themselves are read
    /// through [`EnvVars`](crate::host::env::EnvVars).
    pub mod env {
        pub use memloop_paths::env::{
            CLAUDE_CODE_DISABLE_AUTO_MEMORY, CLAUDE_CODE_SIMPLE, CLAUDE_CONFIG_DIR,
            CLAUDE_COWORK_MEMORY_EXTRA_GUIDELINES, CLAUDE_COWORK_MEMORY_PATH_OVERRIDE,
            DISABLE_AUTO_MEMORY, MEMLOOP_HOME, MEMORY_DIR, MEMORY_EXTRA_GUIDELINES,
            REDACT_TRANSCRIPTS, SIMPLE, TEAM_MEMORY, memory_enabled, memory_switched_off_by,
            redact_transcripts,
        };
    }

    /// Extraction: the stop hook whose extractor writes new memories in the background (the
    /// trait is [`Extractor`](crate::Extractor)).
    pub mod extract {
        pub use memloop_memory::extract::{
            EXTRACTOR_PURPOSE, ExtractError, ExtractionContext, ExtractionScheduler,
            ExtractorConfig, ForkedExtractor, MEMORY_SAVED_ATTACHMENT_KIND, SchedulerConfig,
        };
    }

    /// Per-session notes, used as the summary when compacting: the `memloop-session-notes`
    /// crate (the trait is [`SessionMemory`](crate::SessionMemory)).
    pub mod session_notes {
        pub use memloop_memory::session_notes::{
            Baselines, CONDENSE_REMINDER, CompactionNotes, DEFAULT_TEMPLATE, DEFAULT_UPDATE_PROMPT,
            EDIT_TOOL_NAME, FileSessionNotes, NOTES_UPDATER_PURPOSE, NotesCaps, NotesEditTool,
            NotesEvent, OversizedSection, Section, SessionMemoryError, SessionNotesConfig,
            SessionNotesHook, UpdateFuture, UpdateReport, UpdateSignal, UpdateThresholds,
            UpdateTrigger, apply_notes_edit, frame, is_section_header, only_this_file,
            oversized_sections, sections,
        };
    }

    /// The contract every memory backend keeps (the `memloop-store` crate; the trait is
    /// [`MemoryStore`](crate::MemoryStore), its rules stated on it): the types it speaks, the
    /// write rules, Claude Code's memory formats, the change feed and its header cache, and the
    /// conformance suite. Everything a backend needs is here.
    pub mod store {
        /// The conformance suite every `MemoryStore` backend runs (feature `conformance`).
        #[cfg(feature = "conformance")]
        pub use memloop_store::conformance;
        pub use memloop_store::{
            ChangeCursor, Changes, CheckedWrite, ExpectedVersion, Followed, Headers, INDEX_FILE,
            IndexCaps, IndexEntry, LOGS_DIR, LoadedIndex, LocalBases, LocalDir, LocalPurpose,
            MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryPath, MemoryScope, MemoryType,
            ParsedMemory, ScanCache, ScanChange, ScanUpdate, Since, StoreDescription,
            StoreLocation, TEAM_DIR, TEAM_INDEX_FILE, VersionedWrite, WriteLimits, WriteMode,
            WriteReport, append_to_existing, canonical_memory_text, content_version, file_stem,
            format_entry_line, format_manifest, format_manifest_capped, format_mtime, is_daily_log,
            load_capped, parse_entries, parse_entry_line, parse_memory, printable,
            read_target_to_rel_path, remove_entry, render_memory, replace_body, shown_name,
            team_relative, title_file_stem, title_key, topic_to_rel_path, upsert_entry,
            validate_rel_path, validate_topic,
        };
    }

    /// The memory dir, memloop's embedded backend (the `memloop-files` crate): Markdown topic
    /// files and a `MEMORY.md` index in Claude Code's format, atomic, contained and locked
    /// writes, crash-safe batches, the change feed, and memloop's own files opened without
    /// following links.
    pub mod files {
        pub use memloop_files::{
            BATCH_JOURNAL, ContainmentGate, Durability, FileMemoryStore, REJECTED_BATCH_JOURNAL,
            ScanConfig, StoreConfig, atomic_write, atomic_write_with, internal_dir,
            open_internal_file, read_internal_file, resolve_existing_prefix, warn_refused,
        };
    }

    /// Where a project's memory lives: the memory dir resolution, the project root and the
    /// per-agent-type memory scopes (the `memloop-paths` crate).
    pub mod paths {
        pub use memloop_paths::{
            AgentMemoryDir, AgentMemoryScope, AgentMemoryScopes, ConfigFlavor, MemoryDirResolver,
            ResolutionRule, ResolvedMemoryDir, ScopeError, canonical_project_root,
            origin_without_credentials, project_dir, project_slug, sanitize_agent_type,
        };
    }

    /// Recall: the `memloop-recall` crate (the trait is [`Selector`](crate::Selector)); its
    /// analyzer is [`text`](crate::text).
    pub mod recall {
        pub use memloop_recall::{
            Bm25Params, Bm25Selector, Clock, DefaultSelector, FallbackSelector, Fusion, HeaderList,
            HybridConfig, HybridSelector, KeywordConfig, KeywordSelector, LlmSelector,
            LlmSelectorConfig, ManualClock, RECALL_ATTACHMENT_KIND, ReadTools, RecallConfig,
            RecallEvent, RecallHook, RerankConfig, RerankSelector, SELECTOR_PROMPT,
            SELECTOR_PURPOSE, SelectionContext, SelectorError, SyncReport, SystemClock,
            VectorSyncReport, parse_selection, read_in_full, selection_schema, vector_cache_for,
            vector_cache_path,
        };
    }
}
