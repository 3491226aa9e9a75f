//! The sentence-transformers Pooling module: token vectors to one sentence vector.

use candle_core::{D, DType, Tensor};
use serde_json::Value;

/// How token vectors become one sentence vector (`1_Pooling/config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pooling {
    /// Mean of the token vectors (padding excluded).
    Mean,
    /// The first token's vector (`[CLS]`).
    Cls,
    /// Element-wise maximum over the tokens (padding excluded).
    Max,
    /// Sum of the token vectors divided by the square root of the token count.
    MeanSqrtLen,
}

impl Pooling {
    /// The mode a pooling config names: the current `"pooling_mode": "mean"` (a string or a
    /// one-element list) or the legacy `pooling_mode_*_tokens` flags, where no flag set means
    /// mean, as in sentence-transformers. A combination of modes (concatenated vectors) or a mode
    /// this crate does not implement is an error naming the mode.
    pub(crate) fn from_config(config: &Value) -> Result<Self, String> {
        let modes: Vec<String> = match config.get("pooling_mode") {
            Some(Value::String(mode)) => vec![mode.clone()],
            Some(Value::Array(modes)) => modes
                .iter()
                .map(|m| {
                    m.as_str()
                        .map(str::to_owned)
                        .ok_or("`pooling_mode` lists a non-string")
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("`pooling_mode` is {other}, not a string")),
            None => {
                const LEGACY: [(&str, &str); 6] = [
                    ("pooling_mode_cls_token", "cls"),
                    ("pooling_mode_max_tokens", "max"),
                    ("pooling_mode_mean_tokens", "mean"),
                    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"),
                    ("pooling_mode_weightedmean_tokens", "weightedmean"),
                    ("pooling_mode_lasttoken", "lasttoken"),
                ];
                let set: Vec<String> = LEGACY
                    .iter()
                    .filter(|(key, _)| config.get(key).and_then(Value::as_bool) == Some(true))
                    .map(|(_, mode)| (*mode).to_owned())
                    .collect();
                if set.is_empty() {
                    vec!["mean".to_owned()]
                } else {
                    set
                }
            }
        };
        match modes.as_slice() {
            [mode] => match mode.as_str() {
                "mean" => Ok(Self::Mean),
                "cls" => Ok(Self::Cls),
                "max" => Ok(Self::Max),
                "mean_sqrt_len_tokens" => Ok(Self::MeanSqrtLen),
                other => Err(format!(
                    "pooling mode `{other}` is not supported (mean, cls, max, mean_sqrt_len_tokens are)"
                )),
            },
            [] => Err("no pooling mode".to_owned()),
            several => Err(format!(
                "a combination of pooling modes ({}) is not supported: one mode is",
                several.join(", ")
            )),
        }
    }

    /// Pool `hidden` (batch × tokens × dim) under `mask` (batch × tokens, 1 for a real token,
    /// 0 for padding) into batch × dim.
    pub(crate) fn pool(self, hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?; // batch × tokens × 1
        match self {
            Self::Cls => hidden.narrow(1, 0, 1)?.squeeze(1),
            Self::Max => {
                // Padding gets -1e9 (sentence-transformers uses -inf), so it never wins.
                let penalty = ((&mask - 1.0)? * 1e9)?;
                hidden.broadcast_add(&penalty)?.max(1)
            }
            Self::Mean | Self::MeanSqrtLen => {
                let sum = hidden.broadcast_mul(&mask)?.sum(1)?;
                let count = mask.sum(1)?.clamp(1e-9, f64::INFINITY)?;
                let count = if self == Self::Mean {
                    count
                } else {
                    count.sqrt()?
                };
                sum.broadcast_div(&count)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use serde_json::json;

    #[test]
    fn modes_from_current_and_legacy_configs() {
        assert_eq!(
            Pooling::from_config(&json!({"pooling_mode": "cls"})),
            Ok(Pooling::Cls)
        );
        assert_eq!(
            Pooling::from_config(&json!({"pooling_mode": ["max"]})),
            Ok(Pooling::Max)
        );
        let legacy =
            json!({"pooling_mode_mean_tokens": false, "pooling_mode_mean_sqrt_len_tokens": true});
        assert_eq!(Pooling::from_config(&legacy), Ok(Pooling::MeanSqrtLen));
        assert_eq!(
            Pooling::from_config(&json!({"word_embedding_dimension": 8})),
            Ok(Pooling::Mean)
        );
        let err = Pooling::from_config(&json!({"pooling_mode": "lasttoken"})).unwrap_err();
        assert!(err.contains("lasttoken"), "{err}");
        let both = json!({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true});
        assert!(
            Pooling::from_config(&both)
                .unwrap_err()
                .contains("cls, mean")
        );
        assert!(Pooling::from_config(&json!({"pooling_mode": 3})).is_err());
    }

    #[test]
    fn padding_is_ignored_by_every_mode() {
        // One sentence of two real tokens and one padding token with huge values.
        let hidden =
            Tensor::new(&[[[1f32, -2.0], [3.0, 4.0], [100.0, 100.0]]], &Device::Cpu).unwrap();
        let mask = Tensor::new(&[[1u32, 1, 0]], &Device::Cpu).unwrap();
        let pooled = |p: Pooling| p.pool(&hidden, &mask).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(pooled(Pooling::Mean), vec![vec![2.0, 1.0]]);
        assert_eq!(pooled(Pooling::Cls), vec![vec![1.0, -2.0]]);
        assert_eq!(pooled(Pooling::Max), vec![vec![3.0, 4.0]]);
        let s = 2f32.sqrt();
        assert_eq!(pooled(Pooling::MeanSqrtLen), vec![vec![4.0 / s, 2.0 / s]]);
    }
}
