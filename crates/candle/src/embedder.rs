//! [`CandleEmbedder`]: a BERT or MPNet sentence-transformers model run in-process on CPU.

use crate::bert::Bert;
use crate::layout::{Layout, Prompts, load};
use crate::pooling::Pooling;
use async_trait::async_trait;
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use memloop_core::embed::{EmbedError, Embedder, normalize};
use std::path::Path;
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
    inner: Arc<Inner>,
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
        let name = std::fs::canonicalize(dir)
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "model".to_owned());
        let model_id = format!("candle:{name}:{}", &layout.fingerprint[..16]);
        tracing::debug!(%model_id, pooling = ?layout.pooling, max_seq_length = layout.max_seq_length, "embedding model loaded");
        Ok(Self {
            dimension: layout.bert.hidden_size,
            model_id,
            inner: Arc::new(Inner {
                model,
                tokenizer,
                pooling: layout.pooling,
                lowercase: layout.lowercase,
                prompts: layout.prompts,
                dimension: layout.bert.hidden_size,
                threads: candle_core::utils::get_num_threads().max(1),
            }),
        })
    }
}

impl std::fmt::Debug for CandleEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandleEmbedder")
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension)
            .field("pooling", &self.inner.pooling)
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
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || inner.embed_all(&texts, role))
            .await
            .map_err(|e| EmbedError::Inference(format!("embedding task failed: {e}")))?
    }
}

impl Inner {
    /// Put the role's prompt before every text, tokenise them, split them into one run of
    /// consecutive texts per thread (about the same number of tokens each), and embed the runs
    /// at once, each on its own thread in forward passes of at most [`MAX_BATCH`] texts. A pass runs packed (no padding, see
    /// [`Bert::forward`]), so its texts need not have similar lengths. The vectors come back in
    /// the order of `texts`.
    fn embed_all(&self, texts: &[String], role: Role) -> Result<Vec<Vec<f32>>, EmbedError> {
        let prompt = match role {
            Role::Query => &self.prompts.query,
            Role::Passage => &self.prompts.passage,
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
