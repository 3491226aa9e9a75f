//! Extraction: after a main-agent turn, a background forked agent reads the new
//! part of the conversation and saves what is worth remembering.
//!
//! - [`Extractor`]: the pluggable step (extraction context → written paths);
//!   [`ForkedExtractor`] is the default.
//! - [`ExtractionScheduler`]: the [`Hook`](memloop_core::Hook) that decides when to run
//!   it (main agent only, cursor, skip-and-advance, throttle, one run per memory dir with a
//!   trailing run, drain).
//! - The extractor and the consolidator share one set of tools and one permission gate:
//!   read-only tools, read-only shell commands, and writes only inside the memory dir.
//!
//! Wiring (offline, with a scripted model that makes the extractor save a preference):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop_testkit::{ScriptStep, ScriptedModel};
//! use memloop_core::{Agent, events::{AgentEvent, VecSink}};
//! use memloop_memory::MemoryEvent;
//! use memloop_memory::dream::DreamHook;
//! use memloop_memory::extract::{EXTRACTOR_PURPOSE, ExtractionScheduler, ForkedExtractor};
//! use memloop_files::FileMemoryStore;
//! use memloop_store::MemoryStore;
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
//! assert!(events.events().contains(&AgentEvent::from(MemoryEvent::MemoriesSaved {
//!     paths: vec!["feedback_indentation.md".into()],
//! })));
//! assert!(store.load_index().await?.content.contains("(feedback_indentation.md)"));
//! # Ok(()) }
//! ```

mod extractor;
mod forked;
mod scheduler;
mod slot;

pub use extractor::{ExtractError, ExtractionContext, Extractor};
pub use forked::{EXTRACTOR_PURPOSE, ExtractorConfig, ForkedExtractor};
pub use scheduler::{ExtractionScheduler, MEMORY_SAVED_ATTACHMENT_KIND, SchedulerConfig};
