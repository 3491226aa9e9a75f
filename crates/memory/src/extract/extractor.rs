//! The [`Extractor`] trait: what a run gets and how it fails.

use crate::writer_tools::WriterError;
use async_trait::async_trait;
use memloop_core::{HookContext, message::Message};
use memloop_store::MemoryPath;

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

/// Why an extraction failed: the background writers' error (shared with the consolidator). The
/// scheduler reports it as
/// [`MemoryEvent::ExtractionFailed`](crate::MemoryEvent::ExtractionFailed) and keeps the
/// cursor where it was.
pub type ExtractError = WriterError;

/// Turns the new part of a conversation into memory files. Object-safe; share it as
/// `Arc<dyn Extractor>`.
///
/// Contract: return the memories written, as memory paths relative to the store
/// (`knowledge/deploys.md`; any order, duplicates allowed); `Err` means nothing useful
/// happened and the same messages should be offered again.
///
/// The paths are [`MemoryPath`]s, not file paths: a store need not be a directory (a database,
/// a map in memory, a remote service has no file to name), and a `MemoryPath` is validated
/// (relative, `/`-separated, never `MEMORY.md`, never outside the store), so what the
/// scheduler reports in [`MemoriesSaved`](crate::MemoryEvent::MemoriesSaved) and the saved
/// notice is a memory of the store, whatever the extractor. A store's write report gives the
/// path (`MemoryPath::new(&report.rel_path)`), and
/// `dyn MemoryStore::memory_path_of` maps a file a tool wrote.
///
/// ```
/// use memloop_memory::extract::{ExtractError, ExtractionContext, Extractor};
/// use memloop_store::MemoryPath;
///
/// /// Saves nothing; handy to switch extraction off in a test without removing the hook.
/// struct Nothing;
///
/// #[async_trait::async_trait]
/// impl Extractor for Nothing {
///     async fn extract(&self, _ctx: &ExtractionContext) -> Result<Vec<MemoryPath>, ExtractError> {
///         Ok(Vec::new())
///     }
/// }
/// let _shared: std::sync::Arc<dyn Extractor> = std::sync::Arc::new(Nothing);
/// ```
#[async_trait]
pub trait Extractor: Send + Sync {
    /// Run one extraction; the memories written, relative to the store.
    async fn extract(&self, ctx: &ExtractionContext) -> Result<Vec<MemoryPath>, ExtractError>;
}
