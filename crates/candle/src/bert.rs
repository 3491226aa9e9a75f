//! The BERT encoder (Hugging Face `BertModel` without its pooler): embeddings, then N layers of
//! self-attention and feed-forward, each with a residual connection and layer norm.
//!
//! Written here with candle-nn instead of taken from candle-transformers: that crate compiles
//! a few hundred models (over a CPU-minute in a debug build, more than candle-core itself) to
//! use this one; the reference-vector tests check this one against sentence-transformers.
//!
//! A batch runs *packed*: the texts' tokens are laid end to end in one `tokens × hidden`
//! matrix, with no padding. Every layer but attention treats tokens independently, so its
//! matrix products cover only real tokens; attention runs text by text, over that text's tokens
//! alone, so no mask is needed and no work is spent on padding.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

/// The fields of a BERT `config.json` the encoder uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
}

fn absolute() -> String {
    "absolute".to_owned()
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
        None
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
    fn apply(self, xs: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::Gelu => crate::gelu::gelu_erf(xs),
            Self::GeluTanh => xs.gelu(),
            Self::Relu => xs.relu(),
        }
    }
}

/// The encoder with its weights.
pub(crate) struct Bert {
    word: Embedding,
    position: Embedding,
    /// Token type 0's embedding (hidden): every token of a single-text input has type 0.
    token_type: Tensor,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
}

struct Layer {
    /// The query, key and value projections as one (3 · hidden × hidden): one matrix product
    /// instead of three. The query's rows are pre-scaled by 1/√head_dim, the scaling of the
    /// attention scores.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
    activation: Activation,
}

impl Bert {
    /// Load the weights, named as Hugging Face saves a `BertModel` (optionally under `bert.`).
    pub(crate) fn load(vb: VarBuilder, config: &Config) -> candle_core::Result<Self> {
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            vb.pp("bert")
        } else {
            vb
        };
        let h = config.hidden_size;
        let head_dim = h / config.num_attention_heads.max(1);
        let norm = |vb: VarBuilder| candle_nn::layer_norm(h, config.layer_norm_eps, vb);
        let e = vb.pp("embeddings");
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let vb = vb.pp(format!("encoder.layer.{i}"));
                let attention = vb.pp("attention");
                let projection = |name: &str| candle_nn::linear(h, h, attention.pp(name));
                Ok(Layer {
                    qkv: fused_qkv(
                        &projection("self.query")?,
                        &projection("self.key")?,
                        &projection("self.value")?,
                        1.0 / (head_dim as f64).sqrt(),
                    )?,
                    attention_out: projection("output.dense")?,
                    attention_norm: norm(attention.pp("output.LayerNorm"))?,
                    intermediate: candle_nn::linear(
                        h,
                        config.intermediate_size,
                        vb.pp("intermediate.dense"),
                    )?,
                    output: candle_nn::linear(config.intermediate_size, h, vb.pp("output.dense"))?,
                    output_norm: norm(vb.pp("output.LayerNorm"))?,
                    activation: config.hidden_act,
                })
            })
            .collect::<candle_core::Result<_>>()?;
        let token_types =
            candle_nn::embedding(config.type_vocab_size, h, e.pp("token_type_embeddings"))?;
        Ok(Self {
            word: candle_nn::embedding(config.vocab_size, h, e.pp("word_embeddings"))?,
            position: candle_nn::embedding(
                config.max_position_embeddings,
                h,
                e.pp("position_embeddings"),
            )?,
            token_type: token_types.embeddings().get(0)?,
            norm: norm(e.pp("LayerNorm"))?,
            layers,
            heads: config.num_attention_heads,
            hidden: h,
        })
    }

    /// Token vectors for a batch of texts, each given by its token ids: the texts' vectors end
    /// to end (total tokens × hidden), the first text's tokens first. Each text attends to its
    /// own tokens only, so a text's vectors do not depend on the rest of the batch.
    pub(crate) fn forward(&self, texts: &[&[u32]]) -> candle_core::Result<Tensor> {
        let lens: Vec<usize> = texts.iter().map(|ids| ids.len()).collect();
        let ids = texts.concat();
        let tokens = ids.len();
        if tokens == 0 {
            return Tensor::zeros((0, self.hidden), DType::F32, &Device::Cpu);
        }
        let positions: Vec<u32> = texts
            .iter()
            .flat_map(|ids| (0..ids.len()).map(|p| u32::try_from(p).unwrap_or(u32::MAX)))
            .collect();
        let ids = Tensor::from_vec(ids, tokens, &Device::Cpu)?;
        let positions = Tensor::from_vec(positions, tokens, &Device::Cpu)?;
        let mut xs = self
            .word
            .forward(&ids)?
            .broadcast_add(&self.token_type)?
            .add(&self.position.forward(&positions)?)?;
        xs = self.norm.forward(&xs)?;
        for layer in &self.layers {
            xs = layer.forward(&xs, &lens, self.heads)?;
        }
        Ok(xs)
    }
}

/// One linear layer computing `query`, `key` and `value` side by side, `query` scaled by
/// `query_scale`.
fn fused_qkv(
    query: &Linear,
    key: &Linear,
    value: &Linear,
    query_scale: f64,
) -> candle_core::Result<Linear> {
    let bias = |layer: &Linear| {
        layer
            .bias()
            .cloned()
            .ok_or_else(|| candle_core::Error::Msg("an attention projection has no bias".into()))
    };
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
    Ok(Linear::new(weight, Some(bias)))
}

impl Layer {
    /// `xs`: the batch's token vectors end to end (tokens × hidden), `lens` tokens per text.
    fn forward(&self, xs: &Tensor, lens: &[usize], heads: usize) -> candle_core::Result<Tensor> {
        let context = attention(&self.qkv.forward(xs)?, lens, heads)?;
        let xs = self
            .attention_norm
            .forward(&(self.attention_out.forward(&context)? + xs)?)?;
        let ff = self
            .output
            .forward(&self.activation.apply(&self.intermediate.forward(&xs)?)?)?;
        self.output_norm.forward(&(ff + xs)?)
    }
}

/// Multi-head self-attention of each text over its own tokens. `qkv` holds every token's
/// (pre-scaled) query, key and value side by side (tokens × 3 · hidden), the texts end to end
/// as `lens` counts them; the result is the tokens × hidden context. The heads are read as
/// strided views of `qkv`, so nothing is copied before the matrix products.
fn attention(qkv: &Tensor, lens: &[usize], heads: usize) -> candle_core::Result<Tensor> {
    let (tokens, width) = qkv.dims2()?;
    let hidden = width / 3;
    let qkv = qkv.reshape((tokens, 3, heads, hidden / heads))?;
    let mut contexts = Vec::with_capacity(lens.len());
    let mut start = 0;
    for &len in lens {
        if len == 0 {
            continue;
        }
        let text = qkv.narrow(0, start, len)?;
        start += len;
        // heads × len × head_dim
        let part = |i: usize| text.get_on_dim(1, i)?.transpose(0, 1);
        let (q, k, v) = (part(0)?, part(1)?, part(2)?);
        let probs = candle_nn::ops::softmax_last_dim(&q.matmul(&k.t()?)?)?;
        contexts.push(probs.matmul(&v)?.transpose(0, 1)?); // len × heads × head_dim
    }
    Tensor::cat(&contexts, 0)?.reshape((tokens, hidden))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

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
        assert_eq!(alone.dims(), &[3, 8]);
        let batch: [&[u32]; 4] = [&[2, 9, 9, 4], &[], text, &[3, 11]];
        let batch = bert.forward(&batch).unwrap();
        assert_eq!(batch.dims(), &[9, 8]);
        let diff = (alone - batch.narrow(0, 4, 3).unwrap())
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff < 1e-5, "{diff}");
        assert_eq!(bert.forward(&[&[], &[]]).unwrap().dims(), &[0, 8]);
    }
}
