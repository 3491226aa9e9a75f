//! The BERT encoder (Hugging Face `BertModel` without its pooler): embeddings, then N layers of
//! self-attention and feed-forward, each with a residual connection and layer norm. MPNet and
//! XLM-RoBERTa are the same encoder with other names and position numbering (see [`Family`]).
//!
//! candle reads the weights (safetensors, Hugging Face's names); the pass itself runs over plain
//! row-major `f32` arrays on the calling thread ([`crate::kernels`]). Not taken from
//! candle-transformers: that crate compiles a few hundred models (over a CPU-minute in a debug
//! build) to use this one; the reference-vector tests check this one against
//! sentence-transformers.
//!
//! A batch runs *packed*: the texts' tokens are laid end to end in one `tokens × hidden`
//! matrix, with no padding. Every layer but attention treats tokens independently, so its
//! matrix products cover only real tokens; attention runs text by text, over that text's tokens
//! alone, so no mask is needed and no work is spent on padding.

use crate::kernels::{Dense, Norm, RelativeBias, attention};
use candle_core::Tensor;
use candle_nn::{Linear, VarBuilder};
use serde::Deserialize;

/// The fields of a BERT, MPNet or XLM-RoBERTa `config.json` the encoder uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Config {
    /// `bert` when absent.
    #[serde(default)]
    pub model_type: Family,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    /// BERT's token types (MPNet has none, XLM-RoBERTa one).
    #[serde(default)]
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
    /// MPNet's relative position buckets (a learned bias per bucket and head on the attention
    /// scores).
    #[serde(default = "thirty_two")]
    pub relative_attention_num_buckets: usize,
    /// MPNet and XLM-RoBERTa number positions after the padding id.
    #[serde(default = "one")]
    pub pad_token_id: usize,
}

/// The encoder family (`model_type`): the same layers, named differently. MPNet adds relative
/// position buckets; MPNet and XLM-RoBERTa number positions from `pad_token_id + 1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Family {
    /// Hugging Face `BertModel` (all-MiniLM-L6-v2, multilingual-e5-small,
    /// paraphrase-multilingual-MiniLM-L12-v2).
    #[default]
    Bert,
    /// Hugging Face `MPNetModel` (all-mpnet-base-v2 and its kin).
    Mpnet,
    /// Hugging Face `XLMRobertaModel` or `RobertaModel`: BERT's layers under `roberta.`,
    /// positions after the padding id, one token type (multilingual-e5-base and -large,
    /// paraphrase-multilingual-mpnet-base-v2, bge-m3's dense vectors).
    #[serde(rename = "xlm-roberta", alias = "roberta")]
    XlmRoberta,
}

fn absolute() -> String {
    "absolute".to_owned()
}

fn thirty_two() -> usize {
    32
}

fn one() -> usize {
    1
}

impl Config {
    /// Why this encoder cannot run the configuration, if it cannot.
    pub(crate) fn unsupported(&self) -> Option<String> {
        if self.position_embedding_type != "absolute" {
            return Some(format!(
                "position_embedding_type `{}` is not supported (absolute is)",
                self.position_embedding_type
            ));
        }
        if self.num_attention_heads == 0 || self.hidden_size % self.num_attention_heads != 0 {
            return Some(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        match self.model_type {
            Family::Bert | Family::XlmRoberta if self.type_vocab_size == 0 => {
                Some("type_vocab_size is 0: this model has token types".to_owned())
            }
            Family::Mpnet if self.relative_attention_num_buckets < 4 => Some(format!(
                "relative_attention_num_buckets {} is too few (4 or more)",
                self.relative_attention_num_buckets
            )),
            _ => None,
        }
    }

    /// The position-table row of a text's first token.
    pub(crate) fn first_position(&self) -> usize {
        match self.model_type {
            Family::Bert => 0,
            Family::Mpnet | Family::XlmRoberta => self.pad_token_id + 1,
        }
    }
}

/// The feed-forward activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) enum Activation {
    /// GELU with the exact error function, BERT's own.
    #[serde(rename = "gelu")]
    Gelu,
    /// GELU's tanh approximation.
    #[serde(alias = "gelu_new", alias = "gelu_pytorch_tanh", rename = "gelu_fast")]
    GeluTanh,
    /// ReLU.
    #[serde(rename = "relu")]
    Relu,
}

impl Activation {
    fn apply(self, xs: &mut [f32]) {
        match self {
            Self::Gelu => crate::gelu::gelu_erf(xs),
            Self::GeluTanh => xs.iter_mut().for_each(|x| {
                let inner = (2.0 / std::f32::consts::PI).sqrt() * (*x + 0.044_715 * *x * *x * *x);
                *x = 0.5 * *x * (1.0 + inner.tanh());
            }),
            Self::Relu => xs.iter_mut().for_each(|x| *x = x.max(0.0)),
        }
    }
}

/// The encoder (BERT, MPNet or XLM-RoBERTa) with its weights, as plain row-major `f32` arrays (see
/// [`crate::kernels`]).
pub(crate) struct Bert {
    /// vocab × hidden.
    word: Vec<f32>,
    /// max positions × hidden.
    position: Vec<f32>,
    /// Token type 0's embedding (hidden): every token of a single-text input has type 0.
    token_type: Vec<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    /// MPNet's learned bias on the attention scores, shared by every layer.
    relative: Option<RelativeBias>,
    /// The position-table row of a text's first token.
    first_position: usize,
    heads: usize,
    hidden: usize,
}

struct Layer {
    /// The query, key and value projections as one (hidden → 3 · hidden): one matrix product
    /// instead of three. The query's part is pre-scaled by 1/√head_dim, the scaling of the
    /// attention scores.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
    activation: Activation,
}

/// The values of `tensor`, row-major.
fn values(tensor: &Tensor) -> candle_core::Result<Vec<f32>> {
    tensor.flatten_all()?.to_vec1::<f32>()
}

/// A layer norm's weights, with its `eps`.
fn norm(layer: &candle_nn::LayerNorm, eps: f64) -> candle_core::Result<Norm> {
    let bias = match layer.bias() {
        Some(bias) => values(bias)?,
        None => vec![0.0; layer.weight().elem_count()],
    };
    Ok(Norm {
        weight: values(layer.weight())?,
        bias,
        eps: eps as f32,
    })
}

/// The bias of a Hugging Face linear layer (BERT's all have one).
fn bias(layer: &Linear) -> candle_core::Result<Tensor> {
    layer
        .bias()
        .cloned()
        .ok_or_else(|| candle_core::Error::Msg("a BERT linear layer has no bias".into()))
}

/// `layer` as a [`Dense`] layer.
fn dense(layer: &Linear) -> candle_core::Result<Dense> {
    Dense::new(&values(layer.weight())?, values(&bias(layer)?)?).map_err(candle_core::Error::Msg)
}

/// One dense layer computing `query`, `key` and `value` side by side, `query` scaled by
/// `query_scale`.
fn fused_qkv(
    query: &Linear,
    key: &Linear,
    value: &Linear,
    query_scale: f64,
) -> candle_core::Result<Dense> {
    let weight = Tensor::cat(
        &[
            (query.weight() * query_scale)?,
            key.weight().clone(),
            value.weight().clone(),
        ],
        0,
    )?;
    let bias = Tensor::cat(
        &[(bias(query)? * query_scale)?, bias(key)?, bias(value)?],
        0,
    )?;
    Dense::new(&values(&weight)?, values(&bias)?).map_err(candle_core::Error::Msg)
}

impl Bert {
    /// Load the weights, named as Hugging Face saves a `BertModel`, an `MPNetModel` or an
    /// `XLMRobertaModel` (optionally under `bert.` / `mpnet.` / `roberta.`).
    pub(crate) fn load(vb: VarBuilder, config: &Config) -> candle_core::Result<Self> {
        let vb = ["bert", "mpnet", "roberta"]
            .into_iter()
            .find(|p| vb.contains_tensor(&format!("{p}.embeddings.word_embeddings.weight")))
            .map_or(vb.clone(), |p| vb.pp(p));
        let h = config.hidden_size;
        let head_dim = h / config.num_attention_heads.max(1);
        let eps = config.layer_norm_eps;
        let norm = |vb: VarBuilder| norm(&candle_nn::layer_norm(h, eps, vb)?, eps);
        let e = vb.pp("embeddings");
        // query, key, value, attention output, attention layer norm.
        let names = match config.model_type {
            Family::Bert | Family::XlmRoberta => [
                "self.query",
                "self.key",
                "self.value",
                "output.dense",
                "output.LayerNorm",
            ],
            Family::Mpnet => ["attn.q", "attn.k", "attn.v", "attn.o", "LayerNorm"],
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let vb = vb.pp(format!("encoder.layer.{i}"));
                let attention = vb.pp("attention");
                let projection = |name: &str| candle_nn::linear(h, h, attention.pp(name));
                Ok(Layer {
                    qkv: fused_qkv(
                        &projection(names[0])?,
                        &projection(names[1])?,
                        &projection(names[2])?,
                        1.0 / (head_dim as f64).sqrt(),
                    )?,
                    attention_out: dense(&projection(names[3])?)?,
                    attention_norm: norm(attention.pp(names[4]))?,
                    intermediate: dense(&candle_nn::linear(
                        h,
                        config.intermediate_size,
                        vb.pp("intermediate.dense"),
                    )?)?,
                    output: dense(&candle_nn::linear(
                        config.intermediate_size,
                        h,
                        vb.pp("output.dense"),
                    )?)?,
                    output_norm: norm(vb.pp("output.LayerNorm"))?,
                    activation: config.hidden_act,
                })
            })
            .collect::<candle_core::Result<_>>()?;
        let table = |rows: usize, name: &str| -> candle_core::Result<Vec<f32>> {
            values(candle_nn::embedding(rows, h, e.pp(name))?.embeddings())
        };
        let (token_type, relative) = match config.model_type {
            Family::Bert | Family::XlmRoberta => {
                let types = table(config.type_vocab_size, "token_type_embeddings")?;
                (types.get(..h).map(<[f32]>::to_vec), None)
            }
            Family::Mpnet => {
                let buckets = config.relative_attention_num_buckets;
                let heads = config.num_attention_heads;
                let weights = vb.get((buckets, heads), "encoder.relative_attention_bias.weight")?;
                let relative = RelativeBias::new(values(&weights)?, buckets, heads)
                    .map_err(candle_core::Error::Msg)?;
                (Some(vec![0.0; h]), Some(relative))
            }
        };
        Ok(Self {
            word: table(config.vocab_size, "word_embeddings")?,
            position: table(config.max_position_embeddings, "position_embeddings")?,
            token_type: token_type.ok_or_else(|| {
                candle_core::Error::Msg("the model has no token type embeddings".into())
            })?,
            norm: norm(e.pp("LayerNorm"))?,
            layers,
            relative,
            first_position: config.first_position(),
            heads: config.num_attention_heads,
            hidden: h,
        })
    }

    /// Token vectors for a batch of texts, each given by its token ids: the texts' vectors end
    /// to end (total tokens × hidden, row-major), the first text's tokens first. Each text
    /// attends to its own tokens only, so a text's vectors do not depend on the rest of the
    /// batch. Runs on the calling thread alone. A token id or position outside the model's
    /// tables is an error.
    pub(crate) fn forward(&self, texts: &[&[u32]]) -> Result<Vec<f32>, String> {
        let h = self.hidden;
        let lens: Vec<usize> = texts.iter().map(|ids| ids.len()).collect();
        let tokens: usize = lens.iter().sum();
        let mut xs = Vec::with_capacity(tokens * h);
        for ids in texts {
            for (position, &id) in ids.iter().enumerate() {
                let word = row(&self.word, h, id as usize, "token id")?;
                let place = row(
                    &self.position,
                    h,
                    self.first_position + position,
                    "position",
                )?;
                xs.extend(
                    word.iter()
                        .zip(place)
                        .zip(&self.token_type)
                        .map(|((w, p), t)| w + t + p),
                );
            }
        }
        self.norm.apply(&mut xs);
        for layer in &self.layers {
            xs = layer.forward(&xs, &lens, self.heads, self.relative.as_ref())?;
        }
        Ok(xs)
    }
}

/// Row `i` (of `width` values) of `table`; `what` names `i` in the error.
fn row<'a>(table: &'a [f32], width: usize, i: usize, what: &str) -> Result<&'a [f32], String> {
    table.get(i * width..(i + 1) * width).ok_or_else(|| {
        format!(
            "{what} {i} is outside the model's {} rows",
            table.len() / width.max(1)
        )
    })
}

impl Layer {
    /// `xs`: the batch's token vectors end to end (tokens × hidden), `lens` tokens per text.
    fn forward(
        &self,
        xs: &[f32],
        lens: &[usize],
        heads: usize,
        relative: Option<&RelativeBias>,
    ) -> Result<Vec<f32>, String> {
        let context = attention(&self.qkv.forward(xs)?, lens, heads, relative)?;
        let mut xs = self.attention_out.forward_residual(&context, xs)?;
        self.attention_norm.apply(&mut xs);
        let mut inner = self.intermediate.forward(&xs)?;
        self.activation.apply(&mut inner);
        let mut out = self.output.forward_residual(&inner, &xs)?;
        self.output_norm.apply(&mut out);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    const DEVICE: Device = Device::Cpu;

    #[test]
    fn activations_by_their_config_names() {
        let act = |name: &str| serde_json::from_value::<Activation>(serde_json::json!(name));
        assert_eq!(act("gelu").unwrap(), Activation::Gelu);
        assert_eq!(act("gelu_new").unwrap(), Activation::GeluTanh);
        assert_eq!(act("gelu_pytorch_tanh").unwrap(), Activation::GeluTanh);
        assert_eq!(act("relu").unwrap(), Activation::Relu);
        assert!(act("swish").is_err());
    }

    #[test]
    fn unsupported_configurations_say_why() {
        let mut config: Config = serde_json::from_value(serde_json::json!({
            "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 16, "hidden_act": "gelu", "max_position_embeddings": 16,
            "type_vocab_size": 2, "layer_norm_eps": 1e-12
        }))
        .unwrap();
        assert_eq!(config.unsupported(), None);
        config.num_attention_heads = 3;
        assert!(config.unsupported().unwrap().contains("multiple"));
        config.num_attention_heads = 2;
        config.position_embedding_type = "relative_key".to_owned();
        assert!(config.unsupported().unwrap().contains("relative_key"));
    }

    #[test]
    fn a_text_attends_to_its_own_tokens_only() {
        // A random 2-layer encoder: a text alone and the same text between two others in one
        // batch gives the same vectors for its tokens.
        let config: Config = serde_json::from_value(serde_json::json!({
            "vocab_size": 20, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": 16, "hidden_act": "gelu", "max_position_embeddings": 16,
            "type_vocab_size": 2, "layer_norm_eps": 1e-12
        }))
        .unwrap();
        let varmap = candle_nn::VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &DEVICE);
        let bert = Bert::load(vb, &config).unwrap();
        let text: &[u32] = &[1, 5, 7];
        let alone = bert.forward(&[text]).unwrap();
        assert_eq!(alone.len(), 3 * 8);
        let batch: [&[u32]; 4] = [&[2, 9, 9, 4], &[], text, &[3, 11]];
        let batch = bert.forward(&batch).unwrap();
        assert_eq!(batch.len(), 9 * 8);
        let diff = alone
            .iter()
            .zip(&batch[4 * 8..7 * 8])
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(diff < 1e-5, "{diff}");
        assert!(bert.forward(&[&[], &[]]).unwrap().is_empty());
        // Ids and positions outside the tables are errors, not panics.
        assert!(bert.forward(&[&[20]]).unwrap_err().contains("token id 20"));
        let long: Vec<u32> = vec![1; 17];
        assert!(bert.forward(&[&long]).unwrap_err().contains("position 16"));
    }
}
