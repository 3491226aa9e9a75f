//! [`CandleEmbedder`]: a BERT or MPNet sentence-transformers model run in-process on CPU.

use crate::bert::Bert;
use crate::layout::{Layout, Prompts, load};
use crate::pooling::Pooling;
use async_trait::async_trait;
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use memloop_core::embed::{EmbedError, Embedder, normalize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokenizers::{
    Encoding, PostProcessor, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy,
};

/// Texts per forward pass: [`Embedder::max_batch`], and the chunk size when a caller passes more.
const MAX_BATCH: usize = 32;

/// An [`Embedder`] running a BERT or MPNet sentence-transformers model (all-MiniLM-L6-v2,
/// all-mpnet-base-v2, bge-small-en, e5-small, ...) in-process on CPU (weights read with
/// [candle](https://docs.rs/candle-core)).
///
/// Load it once from a model directory with [`load`](CandleEmbedder::load) and share it
/// (`Arc<dyn Embedder>`); each [`embed`](Embedder::embed) call tokenises and runs the model on
/// tokio's blocking pool, so it never stalls the async runtime. Vectors are always
/// L2-normalised, as the [`Embedder`] contract requires, even for a model whose `modules.json`
/// has no Normalize module (cosine similarity is unchanged by it).
pub struct CandleEmbedder {
    /// The model, once loaded: loaded by [`load`](CandleEmbedder::load), on first use after
    /// [`open`](CandleEmbedder::open). A failed load is kept, so every call reports it.
    model: Arc<tokio::sync::OnceCell<Result<Arc<Inner>, String>>>,
    /// The directory, for a lazy load.
    dir: PathBuf,
    /// Prompts used when the directory declares none ([`with_default_prompts`]).
    ///
    /// [`with_default_prompts`]: CandleEmbedder::with_default_prompts
    fallback_prompts: Prompts,
    /// Whether the directory declares prompts of its own (read once, with the layout).
    declares_prompts: bool,
    model_id: String,
    dimension: usize,
}

/// What a forward pass needs; shared with the blocking tasks.
struct Inner {
    model: Bert,
    tokenizer: Tokenizer,
    pooling: Pooling,
    lowercase: bool,
    prompts: Prompts,
    /// Values per token vector (`hidden_size`).
    dimension: usize,
    /// Threads a call's texts are split between (`RAYON_NUM_THREADS`, else the physical cores,
    /// as candle counts them). Each part is whole forward passes on one thread (the pass never
    /// leaves it, see `kernels`): texts are independent, so no thread waits on another
    /// mid-pass. Splitting each matrix product between the threads instead (candle's way)
    /// synchronises them a few hundred times per pass.
    threads: usize,
}

impl CandleEmbedder {
    /// Load the sentence-transformers model in directory `dir`, as sentence-transformers itself
    /// would: `modules.json` (a Transformer, a Pooling and an optional Normalize module),
    /// `config.json` (a BERT or MPNet config), `tokenizer.json`, `model.safetensors`, the
    /// Pooling module's `config.json` (mean, cls, max or mean_sqrt_len_tokens) and, if present,
    /// `sentence_bert_config.json` (`max_seq_length`, default 512, capped by the positions the
    /// model has; longer texts are truncated; `do_lower_case`).
    ///
    /// Reads the weights into memory (about 90 MB for all-MiniLM-L6-v2) and takes a fraction of
    /// a second; from async code, call it inside `tokio::task::spawn_blocking`. Nothing is ever
    /// downloaded.
    ///
    /// # Errors
    ///
    /// [`EmbedError::Load`] naming the file when a file is missing or malformed, or when the
    /// model is not one this crate runs (another architecture than BERT or MPNet, an
    /// unsupported pooling mode, a module such as Dense after pooling).
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, EmbedError> {
        let dir = dir.as_ref();
        let layout = Layout::read(dir)?;
        let identity = Identity::of(dir, &layout);
        let inner = Inner::load(dir, layout)?;
        let model = tokio::sync::OnceCell::new_with(Some(Ok(Arc::new(inner))));
        Ok(identity.embedder(dir, model))
    }

    /// The model in directory `dir`, loaded on first use (on tokio's blocking pool) rather than
    /// now: a host can set recall up at once and pay for the weights only when a query needs
    /// them. Reads only the small configuration files now, for
    /// [`model_id`](Embedder::model_id) and [`dimension`](Embedder::dimension).
    ///
    /// Never fails: a directory that is missing, truncated or not a model this crate runs gives
    /// an embedder whose every call fails with the same [`EmbedError::Load`] that
    /// [`load`](Self::load) would have returned. A hybrid selector then ranks with BM25 alone
    /// and says why in a `RecallDegraded` event each turn.
    pub fn open(dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        match Layout::read(dir) {
            Ok(layout) => Identity::of(dir, &layout).embedder(dir, tokio::sync::OnceCell::new()),
            Err(e) => {
                let identity = Identity {
                    model_id: format!("candle:{}:unavailable", dir_name(dir)),
                    dimension: 0,
                    declares_prompts: false,
                };
                identity.embedder(
                    dir,
                    tokio::sync::OnceCell::new_with(Some(Err(e.to_string()))),
                )
            }
        }
    }

    /// Use `query` and `passage` as the prompts when the model directory declares none in
    /// `config_sentence_transformers.json` (models published before sentence-transformers had
    /// prompts, such as the e5 family: `"query: "` and `"passage: "`). A directory's own
    /// prompts win. When they are used, they are part of the [`model_id`](Embedder::model_id).
    #[must_use]
    pub fn with_default_prompts(mut self, query: &str, passage: &str) -> Self {
        if self.fallback_prompts.is_empty() && !self.declares_prompts {
            self.fallback_prompts = Prompts {
                query: query.to_owned(),
                passage: passage.to_owned(),
            };
            self.model_id = format!("{}:prompts:{query:?}:{passage:?}", self.model_id);
        }
        self
    }

    /// The model directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// What names a model and its vectors, from its configuration files alone.
struct Identity {
    model_id: String,
    dimension: usize,
    declares_prompts: bool,
}

impl Identity {
    fn of(dir: &Path, layout: &Layout) -> Self {
        Self {
            model_id: format!("candle:{}:{}", dir_name(dir), &layout.fingerprint[..16]),
            dimension: layout.bert.hidden_size,
            declares_prompts: !layout.prompts.is_empty(),
        }
    }

    fn embedder(
        self,
        dir: &Path,
        model: tokio::sync::OnceCell<Result<Arc<Inner>, String>>,
    ) -> CandleEmbedder {
        CandleEmbedder {
            model: Arc::new(model),
            dir: dir.to_path_buf(),
            fallback_prompts: Prompts::default(),
            declares_prompts: self.declares_prompts,
            model_id: self.model_id,
            dimension: self.dimension,
        }
    }
}

/// The directory's own name (a Hugging Face snapshot: the repository's), for model ids.
fn dir_name(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    crate::hub::repo_of_snapshot(&dir)
        .map(|repo| repo.rsplit('/').next().unwrap_or(&repo).to_owned())
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "model".to_owned())
}

impl Inner {
    /// Read the tokenizer and the weights of the model `layout` describes.
    fn load(dir: &Path, layout: Layout) -> Result<Self, EmbedError> {
        let tokenizer_path = layout.model_dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_bytes(&layout.tokenizer_json)
            .map_err(|e| load(&tokenizer_path, format!("not a tokenizer: {e}")))?;
        let special = tokenizer
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(false));
        if layout.max_seq_length <= special {
            let why = format!(
                "max_seq_length {} leaves no room for text after {special} special tokens",
                layout.max_seq_length
            );
            return Err(load(
                &layout.model_dir.join("sentence_bert_config.json"),
                why,
            ));
        }
        let tokens = tokenizer.get_vocab_size(true);
        if tokens > layout.bert.vocab_size {
            let why = format!(
                "{tokens} tokens, more than the model's vocab_size {}",
                layout.bert.vocab_size
            );
            return Err(load(&tokenizer_path, why));
        }
        // A model's embedding table has a row per token of its tokenizer, plus at most a few
        // spare rows (multilingual-e5-small: 250,002 tokens, 250,037 rows). A tokenizer that
        // leaves most rows unused is another model's.
        if tokens < layout.bert.vocab_size - layout.bert.vocab_size / 10 {
            let why = format!(
                "{tokens} tokens, far fewer than the model's vocab_size {}: this tokenizer \
                 belongs to another model",
                layout.bert.vocab_size
            );
            return Err(load(&tokenizer_path, why));
        }
        // The file's own truncation and padding (all-MiniLM-L6-v2's pads everything to 128) are
        // replaced by sentence-transformers' behaviour: truncate at max_seq_length, pad per batch.
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: layout.max_seq_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| load(&tokenizer_path, e))?;
        tokenizer.with_padding(None);

        let weights_path = layout.model_dir.join("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|e| load(&weights_path, e))?;
        let vb = VarBuilder::from_slice_safetensors(&weights, DType::F32, &Device::Cpu)
            .map_err(|e| load(&weights_path, e))?;
        let model = Bert::load(vb, &layout.bert).map_err(|e| load(&weights_path, e))?;

        if !layout.normalize {
            tracing::debug!(dir = %dir.display(), "model has no Normalize module; vectors are normalised anyway");
        }
        tracing::debug!(dir = %dir.display(), pooling = ?layout.pooling, max_seq_length = layout.max_seq_length, "embedding model loaded");
        Ok(Self {
            model,
            tokenizer,
            pooling: layout.pooling,
            lowercase: layout.lowercase,
            prompts: layout.prompts,
            dimension: layout.bert.hidden_size,
            threads: candle_core::utils::get_num_threads().max(1),
        })
    }
}

impl std::fmt::Debug for CandleEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandleEmbedder")
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension)
            .field("dir", &self.dir)
            .field("loaded", &self.model.initialized())
            .finish_non_exhaustive()
    }
}

/// `lens` (tokens per text) cut into at most `parts` runs of consecutive texts with about the
/// same number of tokens each; every run holds at least one text, and together they cover
/// `0..lens.len()` in order. No texts, no runs.
fn split_by_tokens(lens: &[usize], parts: usize) -> Vec<std::ops::Range<usize>> {
    let parts = parts.clamp(1, lens.len().max(1));
    let total: usize = lens.iter().sum();
    let mut runs = Vec::with_capacity(parts);
    let (mut start, mut seen) = (0, 0);
    for (i, len) in lens.iter().enumerate() {
        seen += len;
        // Close the run once it holds its share of the tokens, keeping a text for each run
        // still to come.
        let share = total * (runs.len() + 1) / parts;
        let left = lens.len() - i - 1;
        if runs.len() + 1 < parts && (seen >= share || left < parts - runs.len()) {
            runs.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < lens.len() {
        runs.push(start..lens.len());
    }
    runs
}

#[async_trait]
impl Embedder for CandleEmbedder {
    /// `memloop.candle`: memloop's own in-process runtime.
    fn provider(&self) -> &str {
        "memloop.candle"
    }

    /// `candle:<directory name>:<16 hex digits>`, the digits a SHA-256 over the directory's
    /// configuration files, `tokenizer.json` and the length of `model.safetensors`.
    fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The model's `hidden_size` (384 for all-MiniLM-L6-v2).
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn max_batch(&self) -> usize {
        MAX_BATCH
    }

    /// Passages (memories), each after the model's passage prompt, if it declares one.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(texts, Role::Passage).await
    }

    /// Queries, each after the model's query prompt, if it declares one (e5: `"query: "`).
    async fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(texts, Role::Query).await
    }

    /// Load the weights now, if [`open`](CandleEmbedder::open) left them for the first call.
    async fn ready(&self) -> Result<(), EmbedError> {
        self.model().await.map(|_| ())
    }
}

/// Which of the model's prompts goes before a text.
#[derive(Debug, Clone, Copy)]
enum Role {
    Query,
    Passage,
}

impl CandleEmbedder {
    /// Embed `texts` in `role` on tokio's blocking pool.
    async fn run(&self, texts: &[String], role: Role) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inner = self.model().await?;
        let texts = texts.to_vec();
        let fallback = self.fallback_prompts.clone();
        tokio::task::spawn_blocking(move || inner.embed_all(&texts, role, &fallback))
            .await
            .map_err(|e| EmbedError::Inference(format!("embedding task failed: {e}")))?
    }

    /// The loaded model: loaded now (once, on the blocking pool) if it was opened lazily. The
    /// load runs in a task of its own, so a caller that gives up waiting (a recall budget) does
    /// not cancel it: the next call finds the model loaded, or still loading.
    async fn model(&self) -> Result<Arc<Inner>, EmbedError> {
        if let Some(loaded) = self.model.get() {
            return loaded.clone().map_err(EmbedError::Load);
        }
        let (cell, dir) = (Arc::clone(&self.model), self.dir.clone());
        let load = tokio::spawn(async move {
            cell.get_or_init(|| async move {
                let span = tracing::info_span!("embedding_model_load", dir = %dir.display());
                let load = move || {
                    let _enter = span.enter();
                    Layout::read(&dir)
                        .and_then(|layout| Inner::load(&dir, layout))
                        .map(Arc::new)
                        .map_err(|e| e.to_string())
                };
                match tokio::task::spawn_blocking(load).await {
                    Ok(loaded) => loaded,
                    Err(e) => Err(format!("loading the embedding model failed: {e}")),
                }
            })
            .await
            .clone()
        });
        match load.await {
            Ok(loaded) => loaded.map_err(EmbedError::Load),
            Err(e) => Err(EmbedError::Load(format!(
                "loading the embedding model failed: {e}"
            ))),
        }
    }
}

impl Inner {
    /// Put the role's prompt before every text, tokenise them, split them into one run of
    /// consecutive texts per thread (about the same number of tokens each), and embed the runs
    /// at once, each on its own thread in forward passes of at most [`MAX_BATCH`] texts. A pass
    /// runs packed (no padding, see [`Bert::forward`]), so its texts need not have similar
    /// lengths. The vectors come back in the order of `texts`. `fallback` holds the prompts
    /// used when the model declares none.
    fn embed_all(
        &self,
        texts: &[String],
        role: Role,
        fallback: &Prompts,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let prompts = if self.prompts.is_empty() {
            fallback
        } else {
            &self.prompts
        };
        let prompt = match role {
            Role::Query => &prompts.query,
            Role::Passage => &prompts.passage,
        };
        let inputs: Vec<String> = texts
            .iter()
            .map(|t| {
                let text = format!("{prompt}{t}");
                if self.lowercase {
                    text.to_lowercase()
                } else {
                    text
                }
            })
            .collect();
        let encodings = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| EmbedError::Inference(format!("tokenisation failed: {e}")))?;
        let lens: Vec<usize> = encodings.iter().map(Encoding::len).collect();
        let runs = split_by_tokens(&lens, self.threads);
        let run = |range: std::ops::Range<usize>| {
            let mut out = Vec::with_capacity(range.len());
            for batch in encodings[range].chunks(MAX_BATCH) {
                out.extend(self.embed_batch(batch)?);
            }
            Ok::<_, EmbedError>(out)
        };
        // The first run on this thread, the others on threads of their own.
        let parts: Vec<Result<Vec<Vec<f32>>, EmbedError>> = match runs.split_first() {
            None => Vec::new(),
            Some((first, rest)) => std::thread::scope(|scope| {
                let others: Vec<_> = rest
                    .iter()
                    .map(|range| scope.spawn(|| run(range.clone())))
                    .collect();
                let mut parts = vec![run(first.clone())];
                parts.extend(others.into_iter().map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(EmbedError::Inference("an embedding thread panicked".into()))
                    })
                }));
                parts
            }),
        };
        let mut out = Vec::with_capacity(encodings.len());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    /// One forward pass: run, pool each text's tokens, normalise.
    fn embed_batch(&self, encodings: &[Encoding]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let ids: Vec<&[u32]> = encodings.iter().map(Encoding::get_ids).collect();
        let lens: Vec<usize> = ids.iter().map(|ids| ids.len()).collect();
        let hidden = self.model.forward(&ids).map_err(EmbedError::Inference)?;
        let mut vectors = self.pooling.pool(&hidden, self.dimension, &lens);
        vectors.iter_mut().for_each(|v| normalize(v));
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::split_by_tokens;

    #[test]
    fn runs_cover_every_text_in_order_with_balanced_tokens() {
        let check = |lens: &[usize], parts: usize| {
            let runs = split_by_tokens(lens, parts);
            assert!(runs.len() <= parts.max(1), "{lens:?} {parts}: {runs:?}");
            assert_eq!(
                runs.len(),
                parts.clamp(1, lens.len().max(1)).min(lens.len())
            );
            let mut next = 0;
            for r in &runs {
                assert_eq!(r.start, next, "{lens:?} {parts}: {runs:?}");
                assert!(!r.is_empty(), "{lens:?} {parts}: {runs:?}");
                next = r.end;
            }
            assert_eq!(next, lens.len());
            runs
        };
        assert!(check(&[], 2).is_empty());
        assert_eq!(check(&[12], 2), vec![0..1]);
        assert_eq!(check(&[10, 10, 10, 10], 2), vec![0..2, 2..4]);
        // A long text first, a long text last, many short ones: a run each, by tokens.
        assert_eq!(check(&[100, 1, 1], 2), vec![0..1, 1..3]);
        assert_eq!(check(&[1, 1, 100], 2), vec![0..2, 2..3]);
        assert_eq!(check(&[1, 1, 100], 3), vec![0..1, 1..2, 2..3]);
        assert_eq!(check(&[5; 32], 1), vec![0..32]);
        // Token shares stay within one text of the even split.
        let lens: Vec<usize> = (0..128).map(|i| 3 + (i * 7) % 40).collect();
        for parts in 2..6 {
            let runs = check(&lens, parts);
            let total: usize = lens.iter().sum();
            for r in runs {
                let tokens: usize = lens[r].iter().sum();
                assert!(
                    tokens.abs_diff(total / parts) <= 43,
                    "{parts}: {tokens} of {total}"
                );
            }
        }
    }
}
