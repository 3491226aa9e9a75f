//! The [`Extractor`] trait: what a run gets and how it fails.

use crate::writer_tools::WriterError;
use async_trait::async_trait;
use memloop_core::{HookContext, message::Message};
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

/// Why an extraction failed: the background writers' error (shared with the consolidator). The
/// scheduler reports it as
/// [`MemoryEvent::ExtractionFailed`](crate::MemoryEvent::ExtractionFailed) and keeps the
/// cursor where it was.
pub type ExtractError = WriterError;

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
