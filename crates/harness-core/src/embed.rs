//! Text embeddings: the [`Embedder`] trait that semantic recall builds on.
//!
//! An embedder turns texts into fixed-length vectors whose cosine similarity tracks meaning
//! ("what does she do for work" lands near "she is a nurse"). memloop ships two: an
//! OpenAI-compatible `/v1/embeddings` client (`OpenAiEmbedder` in crate `memloop-providers`)
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

impl EmbedError {
    /// The error's kind as a trace's `error.type`: `load`, `inference`, `shape`, or the model
    /// error's own.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Load(_) => "load",
            Self::Inference(_) => "inference",
            Self::Shape { .. } => "shape",
            Self::Model(e) => crate::telemetry::error_type(e),
        }
    }
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

    /// Embed `texts`: one normalised vector per text, in order. These are the texts searched
    /// (memories, passages).
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// Embed search queries: one normalised vector per text, in order. Asymmetric retrieval
    /// models (e5, bge English v1.5) embed a question differently from the passages it should
    /// find (see [`Prefixed`]); the default embeds queries as [`embed`](Embedder::embed) does.
    async fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(texts).await
    }

    /// Who serves the vectors, as OpenTelemetry's `gen_ai.provider.name` names it (`openai`,
    /// `memloop.candle`, ...). Default `unknown`.
    fn provider(&self) -> &str {
        "unknown"
    }

    /// Get ready for the first call now: an embedder that loads lazily (a local model's
    /// weights) loads here, so that the first query is not the one that waits. Callers with no
    /// time budget call it before work that has one ([`HybridSelector::warm`] does). The
    /// default has nothing to do.
    ///
    /// [`HybridSelector::warm`]: https://docs.rs/memloop-recall
    async fn ready(&self) -> Result<(), EmbedError> {
        Ok(())
    }
}

impl dyn Embedder + '_ {
    /// [`embed`](Embedder::embed) in chunks of [`max_batch`](Embedder::max_batch), checking
    /// that every chunk came back with one vector of [`dimension`](Embedder::dimension) per
    /// text. The one entry point callers use, so a misbehaving embedder is caught in one place.
    pub async fn embed_checked(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.checked(texts, false).await
    }

    /// [`embed_queries`](Embedder::embed_queries), chunked and checked as `embed_checked` is.
    pub async fn embed_queries_checked(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.checked(texts, true).await
    }

    async fn checked(&self, texts: &[String], queries: bool) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let span = crate::telemetry::embeddings_span(
            self.provider(),
            self.model_id(),
            texts.len(),
            if queries { "query" } else { "passage" },
        );
        let result =
            tracing::Instrument::instrument(self.checked_chunks(texts, queries), span.clone())
                .await;
        if let Err(e) = &result {
            span.record("error.type", e.kind());
            span.record("otel.status_code", "ERROR");
        }
        result
    }

    async fn checked_chunks(
        &self,
        texts: &[String],
        queries: bool,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let dim = self.dimension();
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.max_batch().max(1)) {
            let vectors = if queries {
                self.embed_queries(chunk).await?
            } else {
                self.embed(chunk).await?
            };
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

/// An embedder for an asymmetric retrieval model: every query gets one prefix and every text
/// searched another before the inner embedder sees them, as the model was trained. e5 models
/// want `"query: "` and `"passage: "` ([`Prefixed::e5`]); bge English v1.5 models an
/// instruction before queries only ([`Prefixed::bge`]). Without them such a model still
/// works, with lower recall. Blank texts pass through unprefixed (they stay blank).
///
/// The prefixes are part of the [`model_id`](Embedder::model_id), so changing them re-embeds
/// the cached memories.
///
/// ```
/// # use std::sync::Arc;
/// # fn demo(served_e5: Arc<dyn memloop_core::embed::Embedder>) {
/// use memloop_core::embed::Prefixed;
/// let embedder = Arc::new(Prefixed::e5(served_e5));
/// # }
/// ```
pub struct Prefixed {
    inner: std::sync::Arc<dyn Embedder>,
    query: String,
    document: String,
    id: String,
}

impl std::fmt::Debug for Prefixed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefixed")
            .field("model_id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Prefixed {
    /// `inner` with `query` before every query and `document` before every text searched
    /// (either may be empty).
    pub fn new(
        inner: std::sync::Arc<dyn Embedder>,
        query: impl Into<String>,
        document: impl Into<String>,
    ) -> Self {
        let (query, document) = (query.into(), document.into());
        let id = format!("{} query={query:?} document={document:?}", inner.model_id());
        Self {
            inner,
            query,
            document,
            id,
        }
    }

    /// The e5 family's prefixes (`intfloat/e5-*`, `multilingual-e5-*`): `"query: "` and
    /// `"passage: "`.
    pub fn e5(inner: std::sync::Arc<dyn Embedder>) -> Self {
        Self::new(inner, "query: ", "passage: ")
    }

    /// The bge English v1.5 models' query instruction (`BAAI/bge-*-en-v1.5`): `"Represent this
    /// sentence for searching relevant passages: "` before queries, nothing before passages.
    /// (bge-m3 takes no prefix: use it as it is.)
    pub fn bge(inner: std::sync::Arc<dyn Embedder>) -> Self {
        Self::new(
            inner,
            "Represent this sentence for searching relevant passages: ",
            "",
        )
    }

    fn with(prefix: &str, texts: &[String]) -> Vec<String> {
        texts
            .iter()
            .map(|t| {
                if prefix.is_empty() || t.trim().is_empty() {
                    t.clone()
                } else {
                    format!("{prefix}{t}")
                }
            })
            .collect()
    }
}

#[async_trait]
impl Embedder for Prefixed {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn max_batch(&self) -> usize {
        self.inner.max_batch()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(&Self::with(&self.document, texts)).await
    }

    async fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // The inner model's own query handling, after the prefix (both are the model's way
        // of telling a question from a passage).
        self.inner
            .embed_queries(&Self::with(&self.query, texts))
            .await
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    async fn ready(&self) -> Result<(), EmbedError> {
        self.inner.ready().await
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

    /// Records every text it is sent, and whether as a query; each vector is the text's
    /// length in characters (queries negated), so the test can tell them apart.
    #[derive(Default)]
    struct Recording(std::sync::Mutex<Vec<(bool, String)>>);

    impl Recording {
        fn vectors(&self, texts: &[String], query: bool) -> Vec<Vec<f32>> {
            let mut seen = self.0.lock().unwrap();
            texts
                .iter()
                .map(|t| {
                    seen.push((query, t.clone()));
                    let n = t.chars().count() as f32;
                    vec![if query { -n } else { n }, 1.0]
                })
                .collect()
        }
    }

    #[async_trait]
    impl Embedder for Recording {
        fn model_id(&self) -> &str {
            "recording"
        }
        fn dimension(&self) -> usize {
            2
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(self.vectors(texts, false))
        }
        async fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(self.vectors(texts, true))
        }
    }

    fn owned(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| (*t).to_owned()).collect()
    }

    #[tokio::test]
    async fn queries_embed_as_texts_unless_the_embedder_says_otherwise() {
        let e: &dyn Embedder = &Fixed(vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert_eq!(
            e.embed_queries_checked(&texts(3)).await.unwrap(),
            e.embed_checked(&texts(3)).await.unwrap()
        );
        let r = Recording::default();
        let e: &dyn Embedder = &r;
        let q = e
            .embed_queries_checked(&owned(&["她在哪里工作？"]))
            .await
            .unwrap();
        let d = e.embed_checked(&owned(&["她在医院工作。"])).await.unwrap();
        assert_eq!((q[0][0], d[0][0]), (-7.0, 7.0));
        assert_eq!(
            *r.0.lock().unwrap(),
            vec![
                (true, "她在哪里工作？".to_owned()),
                (false, "她在医院工作。".to_owned())
            ]
        );
    }

    #[tokio::test]
    async fn prefixed_puts_each_prefix_before_its_role_in_every_script() {
        let inner = std::sync::Arc::new(Recording::default());
        let e5 = Prefixed::e5(inner.clone());
        let e: &dyn Embedder = &e5;
        e.embed_queries_checked(&owned(&["Где работает Мелани?", "  "]))
            .await
            .unwrap();
        e.embed_checked(&owned(&[
            "メラニーは看護師です。",
            "",
            "멜라니는 간호사입니다.",
        ]))
        .await
        .unwrap();
        assert_eq!(
            *inner.0.lock().unwrap(),
            vec![
                (true, "query: Где работает Мелани?".to_owned()),
                // Blank texts stay blank (an endpoint sends them as zero vectors).
                (true, "  ".to_owned()),
                (false, "passage: メラニーは看護師です。".to_owned()),
                (false, String::new()),
                (false, "passage: 멜라니는 간호사입니다.".to_owned()),
            ]
        );
        // bge: an instruction before queries, nothing before passages.
        let inner = std::sync::Arc::new(Recording::default());
        let bge = Prefixed::bge(inner.clone());
        let e: &dyn Embedder = &bge;
        e.embed_queries_checked(&owned(&["护士"])).await.unwrap();
        e.embed_checked(&owned(&["护士"])).await.unwrap();
        assert_eq!(
            *inner.0.lock().unwrap(),
            vec![
                (
                    true,
                    "Represent this sentence for searching relevant passages: 护士".to_owned()
                ),
                (false, "护士".to_owned()),
            ]
        );
    }

    #[test]
    fn the_prefixes_are_part_of_the_model_id() {
        let inner: std::sync::Arc<dyn Embedder> = std::sync::Arc::new(Recording::default());
        let ids = [
            Prefixed::e5(inner.clone()).model_id().to_owned(),
            Prefixed::bge(inner.clone()).model_id().to_owned(),
            Prefixed::new(inner.clone(), "", "").model_id().to_owned(),
        ];
        assert!(ids.iter().all(|id| id.starts_with("recording ")), "{ids:?}");
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
        assert!(ids.iter().all(|id| id != inner.model_id()));
    }

    #[tokio::test]
    async fn embed_queries_checked_rejects_wrong_shapes() {
        struct BadQueries;
        #[async_trait]
        impl Embedder for BadQueries {
            fn model_id(&self) -> &str {
                "bad"
            }
            fn dimension(&self) -> usize {
                2
            }
            async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
                Ok(vec![vec![1.0, 0.0]; texts.len()])
            }
            async fn embed_queries(&self, _: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
                Ok(vec![vec![f32::NAN]])
            }
        }
        let e: &dyn Embedder = &BadQueries;
        assert!(e.embed_checked(&texts(1)).await.is_ok());
        let err = e.embed_queries_checked(&texts(1)).await.unwrap_err();
        assert!(matches!(err, EmbedError::Shape { .. }), "{err}");
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
