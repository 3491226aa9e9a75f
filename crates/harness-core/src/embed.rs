//! Text embeddings: the [`Embedder`] trait that semantic recall builds on.
//!
//! An embedder turns texts into fixed-length vectors whose cosine similarity tracks meaning
//! ("what does she do for work" lands near "she is a nurse"). memloop ships two: an
//! OpenAI-compatible `/v1/embeddings` client (`providers::OpenAiEmbedder`, feature `providers`)
//! and an in-process BERT model (the `memloop-candle` crate). Recall never needs one: without an
//! embedder it ranks with BM25 alone.
//!
//! ```
//! use memloop_core::embed::{EmbedError, Embedder, normalize};
//!
//! /// Counts letters: a toy embedder, here to show the trait's shape.
//! struct Letters;
//!
//! #[async_trait::async_trait]
//! impl Embedder for Letters {
//!     fn model_id(&self) -> &str { "letters-v1" }
//!     fn dimension(&self) -> usize { 26 }
//!     async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
//!         Ok(texts.iter().map(|t| {
//!             let mut v = vec![0.0; 26];
//!             for b in t.bytes().filter(u8::is_ascii_alphabetic) {
//!                 v[(b.to_ascii_lowercase() - b'a') as usize] += 1.0;
//!             }
//!             normalize(&mut v);
//!             v
//!         }).collect())
//!     }
//! }
//! ```

use crate::model::ModelError;
use async_trait::async_trait;

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The embedding endpoint failed; the same typed errors (and retries) as a chat model.
    #[error("embedding request failed: {0}")]
    Model(#[from] ModelError),
    /// A local model could not be loaded (missing or malformed files).
    #[error("cannot load embedding model: {0}")]
    Load(String),
    /// Inference or tokenisation failed.
    #[error("embedding failed: {0}")]
    Inference(String),
    /// The embedder returned vectors of the wrong count or length.
    #[error("embedder returned {got} where {expected} was expected")]
    Shape {
        /// What the caller expected (e.g. `"3 vectors of 384"`).
        expected: String,
        /// What came back.
        got: String,
    },
}

/// Turns texts into vectors. Object-safe: share it as `Arc<dyn Embedder>`.
///
/// Implementations return one vector of [`dimension`](Embedder::dimension) floats per input
/// text, in input order, L2-normalised (so a dot product is the cosine similarity). Callers
/// batch their own work in chunks of at most [`max_batch`](Embedder::max_batch) texts.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// A stable id of the model and its settings. Cached vectors are keyed by it: when it
    /// changes, every cached vector is recomputed.
    fn model_id(&self) -> &str;

    /// Length of every vector this embedder returns.
    fn dimension(&self) -> usize;

    /// Largest number of texts one [`embed`](Embedder::embed) call should carry. Default 32.
    fn max_batch(&self) -> usize {
        32
    }

    /// Embed `texts`: one normalised vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

impl dyn Embedder + '_ {
    /// [`embed`](Embedder::embed) in chunks of [`max_batch`](Embedder::max_batch), checking
    /// that every chunk came back with one vector of [`dimension`](Embedder::dimension) per
    /// text. The one entry point callers use, so a misbehaving embedder is caught in one place.
    pub async fn embed_checked(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let dim = self.dimension();
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.max_batch().max(1)) {
            let vectors = self.embed(chunk).await?;
            if vectors.len() != chunk.len() || vectors.iter().any(|v| v.len() != dim) {
                let lens: Vec<usize> = vectors.iter().map(Vec::len).collect();
                return Err(EmbedError::Shape {
                    expected: format!("{} vectors of {dim}", chunk.len()),
                    got: format!("{} vectors of lengths {lens:?}", vectors.len()),
                });
            }
            if vectors.iter().flatten().any(|x| !x.is_finite()) {
                return Err(EmbedError::Shape {
                    expected: "finite numbers".to_owned(),
                    got: "NaN or infinity".to_owned(),
                });
            }
            out.extend(vectors);
        }
        Ok(out)
    }
}

/// Scale `v` to unit length in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Dot product of two vectors of equal length: the cosine similarity of normalised vectors.
/// Extra elements of the longer one are ignored.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<Vec<f32>>);

    #[async_trait]
    impl Embedder for Fixed {
        fn model_id(&self) -> &str {
            "fixed"
        }
        fn dimension(&self) -> usize {
            2
        }
        fn max_batch(&self) -> usize {
            2
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(self.0.iter().take(texts.len()).cloned().collect())
        }
    }

    fn texts(n: usize) -> Vec<String> {
        (0..n).map(|i| i.to_string()).collect()
    }

    #[tokio::test]
    async fn embed_checked_batches_and_keeps_order() {
        let e: &dyn Embedder = &Fixed(vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        let out = e.embed_checked(&texts(3)).await.unwrap();
        assert_eq!(out, vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![1.0, 0.0]]);
    }

    #[tokio::test]
    async fn embed_checked_rejects_wrong_shapes_and_nan() {
        let short: &dyn Embedder = &Fixed(vec![vec![1.0]]);
        let err = short.embed_checked(&texts(1)).await.unwrap_err();
        assert!(matches!(err, EmbedError::Shape { .. }), "{err}");
        let missing: &dyn Embedder = &Fixed(vec![vec![1.0, 0.0]]);
        assert!(missing.embed_checked(&texts(2)).await.is_err());
        let nan: &dyn Embedder = &Fixed(vec![vec![f32::NAN, 0.0]]);
        assert!(nan.embed_checked(&texts(1)).await.is_err());
    }

    #[test]
    fn normalize_and_dot() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
        let mut zero = vec![0.0, 0.0];
        normalize(&mut zero);
        assert_eq!(zero, vec![0.0, 0.0]);
    }
}
