//! Reading a sentence-transformers model directory: which modules it chains, where their files
//! are, and a fingerprint of what decides its vectors.

use crate::bert;
use crate::pooling::Pooling;
use memloop_core::embed::EmbedError;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Sequence length when `sentence_bert_config.json` names none (capped by the model's
/// `max_position_embeddings`).
const DEFAULT_MAX_SEQ_LENGTH: usize = 512;

/// Everything [`CandleEmbedder`](crate::CandleEmbedder) needs from a model directory, read and
/// checked, except the weights themselves.
pub(crate) struct Layout {
    /// The BERT configuration (`config.json`).
    pub bert: bert::Config,
    /// The bytes of `tokenizer.json`.
    pub tokenizer_json: Vec<u8>,
    /// The Transformer module's directory: `config.json`, `tokenizer.json`,
    /// `model.safetensors`, `sentence_bert_config.json`.
    pub model_dir: PathBuf,
    /// The Pooling module's mode.
    pub pooling: Pooling,
    /// Whether `modules.json` ends with a Normalize module.
    pub normalize: bool,
    /// Longest token sequence, special tokens included; longer texts are truncated.
    pub max_seq_length: usize,
    /// Whether texts are lowercased before tokenisation (`do_lower_case`).
    pub lowercase: bool,
    /// The texts put before queries and before passages (`config_sentence_transformers.json`).
    pub prompts: Prompts,
    /// SHA-256 (hex) over every small file read and the weights' length.
    pub fingerprint: String,
}

impl Layout {
    /// Read the directory `dir`: `modules.json` (a Transformer, a Pooling and optionally a
    /// Normalize module, nothing else), the Transformer's `config.json`, `tokenizer.json`,
    /// `model.safetensors` (its length only) and optional `sentence_bert_config.json`, and the
    /// Pooling module's `config.json`.
    pub(crate) fn read(dir: &Path) -> Result<Self, EmbedError> {
        let mut files = Files::default();
        let modules = files.json(&dir.join("modules.json"))?;
        let modules = Modules::parse(&modules).map_err(|e| load(&dir.join("modules.json"), e))?;

        let model_dir = dir.join(&modules.transformer);
        let config_path = model_dir.join("config.json");
        let config = files.json(&config_path)?;
        match config.get("model_type").and_then(Value::as_str) {
            None | Some("bert" | "mpnet" | "xlm-roberta" | "roberta") => {}
            Some(kind) => {
                let why = format!(
                    "model_type `{kind}` is not supported: a BERT, MPNet or XLM-RoBERTa model is"
                );
                return Err(load(&config_path, why));
            }
        }
        let bert: bert::Config = serde_json::from_value(config).map_err(|e| {
            load(
                &config_path,
                format!("not a BERT, MPNet or XLM-RoBERTa config: {e}"),
            )
        })?;
        if let Some(why) = bert.unsupported() {
            return Err(load(&config_path, why));
        }
        let tokenizer_json = files.bytes(&model_dir.join("tokenizer.json"))?;
        files.length(&model_dir.join("model.safetensors"))?;

        let st_config_path = model_dir.join("sentence_bert_config.json");
        let st_config = if st_config_path.exists() {
            Some(files.json(&st_config_path)?)
        } else {
            None
        };
        let field = |name: &str| {
            st_config
                .as_ref()
                .and_then(|c| c.get(name))
                .filter(|v| !v.is_null())
        };
        let max_seq_length = match field("max_seq_length") {
            None => DEFAULT_MAX_SEQ_LENGTH,
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    load(
                        &st_config_path,
                        format!("max_seq_length is {v}, not a count"),
                    )
                })?,
        }
        .min(
            bert.max_position_embeddings
                .saturating_sub(bert.first_position()),
        );
        let lowercase = match field("do_lower_case") {
            None => false,
            Some(v) => v.as_bool().ok_or_else(|| {
                load(
                    &st_config_path,
                    format!("do_lower_case is {v}, not a boolean"),
                )
            })?,
        };

        let prompts_path = dir.join("config_sentence_transformers.json");
        let prompts = if prompts_path.exists() {
            Prompts::from_config(&files.json(&prompts_path)?).map_err(|e| load(&prompts_path, e))?
        } else {
            Prompts::default()
        };

        let pooling_path = dir.join(&modules.pooling).join("config.json");
        let pooling_config = files.json(&pooling_path)?;
        let pooling = Pooling::from_config(&pooling_config).map_err(|e| load(&pooling_path, e))?;
        let pooled_dim = ["embedding_dimension", "word_embedding_dimension"]
            .iter()
            .find_map(|key| pooling_config.get(key).and_then(Value::as_u64));
        if let Some(dim) = pooled_dim.filter(|&d| usize::try_from(d).ok() != Some(bert.hidden_size))
        {
            let why = format!(
                "embedding dimension {dim} differs from the model's hidden_size {}",
                bert.hidden_size
            );
            return Err(load(&pooling_path, why));
        }

        Ok(Self {
            bert,
            tokenizer_json,
            model_dir,
            pooling,
            normalize: modules.normalize,
            max_seq_length,
            lowercase,
            prompts,
            fingerprint: files.fingerprint(),
        })
    }
}

/// The prompts a sentence-transformers model declares for retrieval: the text put before each
/// query and before each passage (e5: `"query: "` and `"passage: "`). Empty when it declares
/// none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Prompts {
    /// Before each query (the `query` prompt).
    pub query: String,
    /// Before each passage: the `document` prompt, else `passage`, else `corpus`, as
    /// sentence-transformers' `encode_document` looks them up.
    pub passage: String,
}

impl Prompts {
    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.query.is_empty() && self.passage.is_empty()
    }

    /// The `prompts` of `config_sentence_transformers.json`; absent or null, none.
    fn from_config(config: &Value) -> Result<Self, String> {
        let prompts = match config.get("prompts") {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Object(prompts)) => prompts,
            Some(other) => return Err(format!("prompts is {other}, not an object")),
        };
        let prompt = |name: &str| -> Result<Option<String>, String> {
            match prompts.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(other) => Err(format!("prompt `{name}` is {other}, not a string")),
            }
        };
        let mut passage = None;
        for name in ["document", "passage", "corpus"] {
            if let Some(text) = prompt(name)? {
                passage.get_or_insert(text);
            }
        }
        Ok(Self {
            query: prompt("query")?.unwrap_or_default(),
            passage: passage.unwrap_or_default(),
        })
    }
}

/// `EmbedError::Load` naming the file.
pub(crate) fn load(path: &Path, why: impl std::fmt::Display) -> EmbedError {
    EmbedError::Load(format!("{}: {why}", path.display()))
}

/// The modules of `modules.json` this crate can run, by their paths.
struct Modules {
    transformer: String,
    pooling: String,
    normalize: bool,
}

impl Modules {
    fn parse(modules: &Value) -> Result<Self, String> {
        let list = modules.as_array().ok_or("not a JSON array of modules")?;
        let mut kinds = Vec::with_capacity(list.len());
        for module in list {
            let kind = module
                .get("type")
                .and_then(Value::as_str)
                .ok_or("a module without a `type`")?;
            let path = module
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            // `sentence_transformers.models.Transformer`, or the newer module paths.
            let name = kind.rsplit('.').next().unwrap_or(kind);
            kinds.push((name, path.to_owned()));
        }
        match kinds.as_slice() {
            [
                ("Transformer", transformer),
                ("Pooling", pooling),
                rest @ ..,
            ] => {
                let normalize = match rest {
                    [] => false,
                    [("Normalize", _)] => true,
                    [(other, _), ..] => {
                        return Err(format!(
                            "module `{other}` after Pooling is not supported (only Normalize is)"
                        ));
                    }
                };
                Ok(Self {
                    transformer: transformer.clone(),
                    pooling: pooling.clone(),
                    normalize,
                })
            }
            _ => {
                let names: Vec<&str> = kinds.iter().map(|(name, _)| *name).collect();
                Err(format!(
                    "modules [{}] are not supported: Transformer, Pooling and an optional Normalize are",
                    names.join(", ")
                ))
            }
        }
    }
}

/// The files read so far, hashed as they are read.
#[derive(Default)]
struct Files {
    hash: Sha256,
}

impl Files {
    fn bytes(&mut self, path: &Path) -> Result<Vec<u8>, EmbedError> {
        let bytes = std::fs::read(path).map_err(|e| load(path, e))?;
        self.record(path, bytes.len() as u64);
        self.hash.update(&bytes);
        Ok(bytes)
    }

    fn json(&mut self, path: &Path) -> Result<Value, EmbedError> {
        let bytes = self.bytes(path)?;
        serde_json::from_slice(&bytes).map_err(|e| load(path, format!("malformed JSON: {e}")))
    }

    /// Only the length: hashing the weights (tens of MB) on every load would cost more than the
    /// load itself, and a changed model virtually always changes a config or the length too.
    fn length(&mut self, path: &Path) -> Result<(), EmbedError> {
        let meta = std::fs::metadata(path).map_err(|e| load(path, e))?;
        self.record(path, meta.len());
        Ok(())
    }

    fn record(&mut self, path: &Path, len: u64) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        self.hash.update(name.as_bytes());
        self.hash.update([0]);
        self.hash.update(len.to_le_bytes());
    }

    fn fingerprint(self) -> String {
        self.hash
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}
