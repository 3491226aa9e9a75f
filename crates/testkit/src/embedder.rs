//! A deterministic fake embedder (feature `embed`): vectors from words, a concept table or a
//! constant, never from a model; it can fail, take time on tokio's clock, or hold its queries
//! at a gate, and it records what it embedded.

use crate::Gate;
use async_trait::async_trait;
use memloop_core::embed::{EmbedError, Embedder, normalize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A concept table: each concept is the list of word stems that express it (matched as
/// substrings of the lowercased text, so `работ` matches `работает`).
pub type ConceptTable = &'static [&'static [&'static str]];

/// How a [`FakeEmbedder`] turns a text into a vector.
#[derive(Debug, Clone)]
enum Vectors {
    /// Each word hashed into one of `dimension` buckets, then normalised.
    Hashed(usize),
    /// One element per concept (how many of its stems the text holds), then `0.1`, normalised.
    Concepts(ConceptTable),
    /// The same vector for every text.
    Constant(Vec<f32>),
}

/// A deterministic [`Embedder`] for tests: the same text gives the same vector on every run
/// and machine, and no model, file or network is involved. Three ways to make vectors:
///
/// - [`hashed`](Self::hashed): a bag of words, each word (lowercased; a run of letters or
///   digits, or a single letter of three or more UTF-8 bytes, so Chinese and Japanese written
///   without spaces still share words) hashed with FNV-1a into one of `dimension` buckets,
///   normalised: texts sharing words are close, others orthogonal or nearly so;
/// - [`concepts`](Self::concepts): a concept table, so texts about one concept land close
///   without sharing a word ("what does she do for work" and "she is a nurse");
/// - [`constant`](Self::constant): one vector for every text, when only that vectors exist
///   matters.
///
/// Settings for a test: [`with_model_id`](Self::with_model_id),
/// [`with_max_batch`](Self::with_max_batch), [`with_delay`](Self::with_delay) (per call, on
/// tokio's clock: a paused clock makes it instant and exact), [`fail`](Self::fail) (every call
/// errs, switchable while in use), [`hold_queries`](Self::hold_queries) (query embeddings
/// wait at a [`Gate`]). It counts the texts it embedded ([`embedded`](Self::embedded)) and
/// keeps them in order ([`seen`](Self::seen)).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_core::embed::{Embedder, dot};
/// use memloop_testkit::FakeEmbedder;
///
/// let e = FakeEmbedder::hashed(64);
/// let v = e.embed(&["deploy on Tuesday".into(), "on Tuesday: DEPLOY".into(), "пицца".into()])
///     .await
///     .unwrap();
/// assert!((dot(&v[0], &v[1]) - 1.0).abs() < 1e-6); // the same words, any order or case
/// assert_eq!(dot(&v[0], &v[2]), 0.0); // no word shared, no bucket shared
/// assert_eq!(e.embedded(), 3);
/// # }
/// ```
#[derive(Debug)]
pub struct FakeEmbedder {
    vectors: Vectors,
    model_id: String,
    max_batch: usize,
    delay: Option<Duration>,
    failure: Mutex<Option<String>>,
    queries_gate: Option<Arc<Gate>>,
    embedded: AtomicUsize,
    seen: Mutex<Vec<String>>,
}

/// A lock that survives a test's panic while holding it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeEmbedder {
    fn with_vectors(vectors: Vectors, model_id: &str) -> Self {
        Self {
            vectors,
            model_id: model_id.to_owned(),
            max_batch: 32,
            delay: None,
            failure: Mutex::new(None),
            queries_gate: None,
            embedded: AtomicUsize::new(0),
            seen: Mutex::default(),
        }
    }

    /// Words hashed into `dimension` buckets (at least 1), normalised; model id
    /// `hashed-<dimension>`.
    pub fn hashed(dimension: usize) -> Self {
        let dimension = dimension.max(1);
        Self::with_vectors(Vectors::Hashed(dimension), &format!("hashed-{dimension}"))
    }

    /// One element per concept of `table` (how many of its stems the lowercased text
    /// contains), then a constant `0.1` (so no vector is zero), normalised: dimension
    /// `table.len() + 1`; model id `concepts`.
    pub fn concepts(table: ConceptTable) -> Self {
        Self::with_vectors(Vectors::Concepts(table), "concepts")
    }

    /// `vector` for every text, as given (normalise it yourself if it matters); model id
    /// `constant`.
    pub fn constant(vector: Vec<f32>) -> Self {
        Self::with_vectors(Vectors::Constant(vector), "constant")
    }

    /// The model id it reports (cached vectors are keyed by it).
    pub fn with_model_id(mut self, id: impl Into<String>) -> Self {
        self.model_id = id.into();
        self
    }

    /// The largest batch it asks for (default 32).
    pub fn with_max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }

    /// Every call takes `delay` on tokio's clock (`tokio::time::sleep`) before it answers.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Every call fails from the start, with [`EmbedError::Inference`] and `reason`.
    pub fn failing(self, reason: impl Into<String>) -> Self {
        self.fail(Some(reason.into()));
        self
    }

    /// From now on, every call fails with [`EmbedError::Inference`] and the reason given
    /// (`None`: every call succeeds again).
    pub fn fail(&self, reason: Option<String>) {
        *lock(&self.failure) = reason;
    }

    /// Every query embedding ([`Embedder::embed_queries`]) waits at `gate` before it is
    /// computed; the texts searched ([`Embedder::embed`]) do not.
    pub fn hold_queries(mut self, gate: Arc<Gate>) -> Self {
        self.queries_gate = Some(gate);
        self
    }

    /// How many texts it has embedded (queries and texts searched; failed calls not counted).
    pub fn embedded(&self) -> usize {
        self.embedded.load(Ordering::SeqCst)
    }

    /// Every text it has embedded, in order.
    pub fn seen(&self) -> Vec<String> {
        lock(&self.seen).clone()
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        match &self.vectors {
            Vectors::Hashed(dimension) => {
                let mut v = vec![0.0f32; *dimension];
                for word in words(&text.to_lowercase()) {
                    // The modulo is below `dimension`, a `usize`: the cast back cannot cut.
                    let bucket = (fnv1a(word.as_bytes()) % *dimension as u64) as usize;
                    v[bucket] += 1.0;
                }
                normalize(&mut v);
                v
            }
            Vectors::Concepts(table) => {
                let lower = text.to_lowercase();
                let mut v: Vec<f32> = table
                    .iter()
                    .map(|stems| stems.iter().filter(|s| lower.contains(*s)).count() as f32)
                    .collect();
                v.push(0.1);
                normalize(&mut v);
                v
            }
            Vectors::Constant(v) => v.clone(),
        }
    }
}

/// The words of `text`: runs of letters and digits, each letter of three or more UTF-8 bytes
/// (the CJK scripts, written without spaces) a word of its own.
fn words(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let single = c.is_alphabetic() && c.len_utf8() >= 3;
        if !c.is_alphanumeric() || single {
            if let Some(s) = start.take() {
                words.push(&text[s..i]);
            }
            if single {
                words.push(&text[i..i + c.len_utf8()]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        words.push(&text[s..]);
    }
    words
}

/// FNV-1a, 64 bits: the same on every platform and Rust release.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[async_trait]
impl Embedder for FakeEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        match &self.vectors {
            Vectors::Hashed(dimension) => *dimension,
            Vectors::Concepts(table) => table.len() + 1,
            Vectors::Constant(v) => v.len(),
        }
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        if let Some(reason) = lock(&self.failure).clone() {
            return Err(EmbedError::Inference(reason));
        }
        self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
        lock(&self.seen).extend(texts.iter().cloned());
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }

    async fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Some(gate) = &self.queries_gate {
            gate.pass().await;
        }
        self.embed(texts).await
    }
}
