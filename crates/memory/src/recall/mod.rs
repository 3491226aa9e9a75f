//! Recall: choosing the memories relevant to a user's message (with a pluggable selector) and
//! surfacing them.
//!
//! - [`Selector`] is the pluggable choice (`Arc<dyn Selector>`); [`LlmSelector`],
//!   [`KeywordSelector`], [`Bm25Selector`], [`HybridSelector`] (BM25 fused with embeddings) and
//!   [`FallbackSelector`] are provided, and [`RerankSelector`] has a model re-rank another
//!   selector's short list. Every caller goes
//!   through `select_checked`, the one place that enforces the contract.
//! - [`RecallHook`] runs the pipeline once per user turn in the background and yields a
//!   `relevant_memories` system-reminder attachment.

mod analyzer;
mod bm25;
mod bm25_selector;
mod fallback;
mod hook;
mod hybrid;
mod keyword;
mod lift;
mod llm;
mod reads;
mod rerank;
mod selector;
mod surface;
mod vectors;

pub use crate::manifest::format_manifest;
pub(crate) use analyzer::fold_with_offsets;
pub use analyzer::{
    Analyzer, Language, Script, UnknownLanguage, detect_language, fold_accents, normalize, tokens,
    words,
};
pub use bm25::Bm25Params;
pub use bm25_selector::{Bm25Selector, SyncReport};
pub use fallback::FallbackSelector;
pub use hook::{RECALL_ATTACHMENT_KIND, RecallConfig, RecallHook};
pub use hybrid::{Fusion, HybridConfig, HybridSelector};
pub use keyword::{KeywordConfig, KeywordSelector};
pub use llm::{
    LlmSelector, LlmSelectorConfig, SELECTOR_PROMPT, SELECTOR_PURPOSE, parse_selection,
    selection_schema,
};
pub use reads::{ReadTools, read_in_full};
pub use rerank::{RerankConfig, RerankSelector};
pub use selector::{HeaderList, SelectionContext, Selector, SelectorError};
pub use surface::{Clock, ManualClock, SystemClock};
pub use vectors::{VectorSyncReport, vector_cache_for, vector_cache_path};
