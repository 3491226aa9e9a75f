//! # memloop-recall
//!
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

#![warn(missing_docs)]

mod bm25;
mod bm25_selector;
mod default;
mod events;
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

pub use bm25::Bm25Params;
pub use bm25_selector::{Bm25Selector, SyncReport};
pub use default::DefaultSelector;
pub use events::RecallEvent;
pub use fallback::FallbackSelector;
pub use hook::{RECALL_ATTACHMENT_KIND, RecallConfig, RecallHook};
pub use hybrid::{Fusion, HybridConfig, HybridSelector};
pub use keyword::{KeywordConfig, KeywordSelector};
pub use llm::{
    LlmSelector, LlmSelectorConfig, SELECTOR_PROMPT, SELECTOR_PURPOSE, parse_selection,
    selection_schema,
};
pub use memloop_store::format_manifest;
/// The language a lexical selector stems Latin-script words in ([`Bm25Params::language`],
/// [`KeywordConfig::language`]): `memloop-text`'s, re-exported.
pub use memloop_text::Language;
pub use reads::{ReadTools, read_in_full};
pub use rerank::{RerankConfig, RerankSelector};
pub use selector::{HeaderList, SelectionContext, Selector, SelectorError};
pub use surface::{Clock, ManualClock, SystemClock};
pub use vectors::{VectorSyncReport, vector_cache_for, vector_cache_path};
