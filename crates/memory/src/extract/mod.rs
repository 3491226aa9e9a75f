//! Extraction: after a main-agent turn, a background forked agent reads the new
//! part of the conversation and saves what is worth remembering.
//!
//! - [`Extractor`]: the pluggable step (extraction context → written paths);
//!   [`ForkedExtractor`] is the default.
//! - [`ExtractionScheduler`]: the [`Hook`](memloop_core::Hook) that decides when to run
//!   it (main agent only, cursor, skip-and-advance, throttle, one run per memory dir with a
//!   trailing run, drain).
//! - [`memory_writer_tools`] / [`memory_writer_gate`]: the permissions shared by the extractor
//!   and the consolidator.
//!
//! Wiring (offline, with a scripted model that makes the extractor save a preference):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop_core::testing::{ScriptStep, ScriptedModel};
//! use memloop_core::{Agent, events::{AgentEvent, VecSink}};
//! use memloop_memory::dream::DreamHook;
//! use memloop_memory::extract::{EXTRACTOR_PURPOSE, ExtractionScheduler, ForkedExtractor};
//! use memloop_memory::{FileMemoryStore, MemoryStore};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let dir = tempfile::tempdir()?;
//! let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(dir.path().join("memory"))?);
//!
//! // Main agent: one answer. Extractor (requests with purpose "extractor"): save, then stop.
//! let model = ScriptedModel::new()
//!     .then(ScriptStep::text("Noted: tabs, not spaces."))
//!     .on_purpose(EXTRACTOR_PURPOSE, |req| {
//!         let after_tool = req.messages.last().is_some_and(|m| m.tool_result_ids().next().is_some());
//!         Some(if after_tool {
//!             ScriptStep::text("saved")
//!         } else {
//!             ScriptStep::tool("memory_write", serde_json::json!({
//!                 "topic": "feedback_indentation", "type": "feedback", "name": "Indentation",
//!                 "description": "the user wants tabs, never spaces",
//!                 "content": "Indent with tabs.\n**Why:** team style.\n**How to apply:** every file."
//!             }))
//!         })
//!     });
//!
//! let extractor = Arc::new(ForkedExtractor::new(store.clone()));
//! let extraction = Arc::new(ExtractionScheduler::new(store.clone(), extractor));
//! let dream = Arc::new(DreamHook::new(store.clone()));
//! let events = VecSink::default();
//! let mut agent = Agent::builder(Arc::new(model))
//!     .events(Arc::new(events.clone()))
//!     .hook(extraction.clone())
//!     .hook(dream)
//!     .build();
//!
//! agent.run_turn("I prefer tabs over spaces").await?;
//! assert!(agent.drain(Duration::from_secs(60)).await.completed); // waits for the extraction
//! assert!(events.events().contains(&AgentEvent::MemoriesSaved {
//!     paths: vec!["feedback_indentation.md".into()],
//! }));
//! assert!(store.load_index().await?.content.contains("(feedback_indentation.md)"));
//! # Ok(()) }
//! ```

mod forked;
mod permissions;
mod scheduler;
mod slot;

pub use forked::{EXTRACTOR_PURPOSE, ExtractorConfig, ForkedExtractor};
pub use permissions::{memory_writer_gate, memory_writer_tools};
pub use scheduler::{ExtractionScheduler, SchedulerConfig};

use crate::store::MemoryStore;
use crate::types::MemoryError;
use async_trait::async_trait;
use memloop_core::{AgentError, HookContext, message::Message};
use std::path::PathBuf;

/// What an [`Extractor`] gets for one run.
#[derive(Debug, Clone)]
pub struct ExtractionContext {
    /// The stop-hook snapshot: conversation, model and system prompt to fork from.
    pub hook: HookContext,
    /// User and assistant messages after the cursor, oldest first (never empty).
    pub new_messages: Vec<Message>,
    /// Whether this run is the trailing run queued while another one was running.
    pub trailing: bool,
}

/// Why an extraction failed. The scheduler reports it as
/// [`AgentEvent::ExtractionFailed`](memloop_core::events::AgentEvent::ExtractionFailed) and keeps the
/// cursor where it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// The forked agent failed (model error, cancellation, ...).
    #[error("forked agent failed: {0}")]
    Agent(#[from] AgentError),
    /// The memory store failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// Any other failure of a custom extractor.
    #[error("extraction failed: {0}")]
    Failed(String),
}

/// Turns the new part of a conversation into memory files. Object-safe; share it as
/// `Arc<dyn Extractor>`.
///
/// Contract: return the absolute paths of the files written (any order, duplicates allowed);
/// `Err` means nothing useful happened and the same messages should be offered again.
///
/// ```
/// use memloop_memory::extract::{ExtractError, ExtractionContext, Extractor};
/// use std::path::{Path, PathBuf};
///
/// /// Saves nothing; handy to switch extraction off in a test without removing the hook.
/// struct Nothing;
///
/// #[async_trait::async_trait]
/// impl Extractor for Nothing {
///     async fn extract(&self, _ctx: &ExtractionContext) -> Result<Vec<PathBuf>, ExtractError> {
///         Ok(Vec::new())
///     }
/// }
/// let _shared: std::sync::Arc<dyn Extractor> = std::sync::Arc::new(Nothing);
/// ```
#[async_trait]
pub trait Extractor: Send + Sync {
    /// Run one extraction.
    async fn extract(&self, ctx: &ExtractionContext) -> Result<Vec<PathBuf>, ExtractError>;
}

/// Written files relative to the store's memory dir, `/`-separated, deduplicated, without
/// `MEMORY.md` and without anything outside the dir (what `MemoriesSaved` / `DreamFinished`
/// report).
pub(crate) fn relative_to_memory_dir(store: &dyn MemoryStore, paths: &[PathBuf]) -> Vec<String> {
    let root = crate::store::RootPaths::of(store);
    let mut out: Vec<String> = Vec::new();
    for p in paths {
        if let Some(rel) = root.relative(store, p) {
            if rel != "MEMORY.md" && !out.contains(&rel) {
                out.push(rel);
            }
        }
    }
    out
}
