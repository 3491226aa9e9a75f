//! The BERT encoder (Hugging Face `BertModel` without its pooler): embeddings, then N layers of
//! self-attention and feed-forward, each with a residual connection and layer norm.
//!
//! Written here with candle-nn instead of taken from candle-transformers: that crate compiles
//! a few hundred models (over a CPU-minute in a debug build, more than candle-core itself) to
//! use this one; the reference-vector tests check this one against sentence-transformers.

use candle_core::{DType, Module, Tensor};
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
    #[serde(default)]
    pub pad_token_id: Option<u32>,
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
            Self::Gelu => xs.gelu_erf(),
            Self::GeluTanh => xs.gelu(),
            Self::Relu => xs.relu(),
        }
    }
}

/// The encoder with its weights.
pub(crate) struct Bert {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
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
        let norm = |vb: VarBuilder| candle_nn::layer_norm(h, config.layer_norm_eps, vb);
        let e = vb.pp("embeddings");
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let vb = vb.pp(format!("encoder.layer.{i}"));
                let attention = vb.pp("attention");
                Ok(Layer {
                    query: candle_nn::linear(h, h, attention.pp("self.query"))?,
                    key: candle_nn::linear(h, h, attention.pp("self.key"))?,
                    value: candle_nn::linear(h, h, attention.pp("self.value"))?,
                    attention_out: candle_nn::linear(h, h, attention.pp("output.dense"))?,
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
        Ok(Self {
            word: candle_nn::embedding(config.vocab_size, h, e.pp("word_embeddings"))?,
            position: candle_nn::embedding(
                config.max_position_embeddings,
                h,
                e.pp("position_embeddings"),
            )?,
            token_type: candle_nn::embedding(
                config.type_vocab_size,
                h,
                e.pp("token_type_embeddings"),
            )?,
            norm: norm(e.pp("LayerNorm"))?,
            layers,
            heads: config.num_attention_heads,
        })
    }

    /// Token vectors (batch × tokens × hidden) for `ids` (batch × tokens, u32) under `mask`
    /// (batch × tokens, 1 for a real token, 0 for padding: padding receives no attention).
    pub(crate) fn forward(&self, ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (_, len) = ids.dims2()?;
        let positions = Tensor::arange(0u32, len as u32, ids.device())?;
        let mut xs = self
            .word
            .forward(ids)?
            .add(&self.token_type.forward(&ids.zeros_like()?)?)?
            .broadcast_add(&self.position.forward(&positions)?)?;
        xs = self.norm.forward(&xs)?;
        // 0 where attended, the lowest f32 where masked; added to the attention scores.
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * f64::from(f32::MAX))?
            .unsqueeze(1)?
            .unsqueeze(1)?; // batch × 1 × 1 × tokens
        for layer in &self.layers {
            xs = layer.forward(&xs, &bias, self.heads)?;
        }
        Ok(xs)
    }
}

impl Layer {
    fn forward(&self, xs: &Tensor, bias: &Tensor, heads: usize) -> candle_core::Result<Tensor> {
        let (batch, len, hidden) = xs.dims3()?;
        let head_dim = hidden / heads;
        let split = |t: Tensor| {
            t.reshape((batch, len, heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(self.query.forward(xs)?)?;
        let k = split(self.key.forward(xs)?)?;
        let v = split(self.value.forward(xs)?)?;
        let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?.broadcast_add(bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((batch, len, hidden))?;
        let xs = self
            .attention_norm
            .forward(&(self.attention_out.forward(&context)? + xs)?)?;
        let ff = self
            .output
            .forward(&self.activation.apply(&self.intermediate.forward(&xs)?)?)?;
        self.output_norm.forward(&(ff + xs)?)
    }
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
    fn padding_does_not_change_the_real_tokens() {
        // A random 2-layer encoder: a sentence alone and padded with two masked tokens gives
        // the same vectors for its real tokens.
        let config: Config = serde_json::from_value(serde_json::json!({
            "vocab_size": 20, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": 16, "hidden_act": "gelu", "max_position_embeddings": 16,
            "type_vocab_size": 2, "layer_norm_eps": 1e-12
        }))
        .unwrap();
        let varmap = candle_nn::VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &DEVICE);
        let bert = Bert::load(vb, &config).unwrap();
        let alone = Tensor::new(&[[1u32, 5, 7]], &DEVICE).unwrap();
        let padded = Tensor::new(&[[1u32, 5, 7, 0, 0]], &DEVICE).unwrap();
        let a = bert.forward(&alone, &alone.ones_like().unwrap()).unwrap();
        let mask = Tensor::new(&[[1u32, 1, 1, 0, 0]], &DEVICE).unwrap();
        let p = bert
            .forward(&padded, &mask)
            .unwrap()
            .narrow(1, 0, 3)
            .unwrap();
        let diff = (a - p)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff < 1e-5, "{diff}");
    }
}
