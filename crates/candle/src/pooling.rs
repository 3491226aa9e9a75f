//! The sentence-transformers Pooling module: token vectors to one sentence vector.

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

    /// Pool the token vectors of a batch of texts into one vector per text: `hidden` holds
    /// every token's `dim` values, the texts end to end, text `i` taking `lens[i]` tokens. A
    /// text without tokens gets a zero vector.
    pub(crate) fn pool(self, hidden: &[f32], dim: usize, lens: &[usize]) -> Vec<Vec<f32>> {
        let mut texts = Vec::with_capacity(lens.len());
        let mut rest = hidden;
        for &len in lens {
            let (tokens, tail) = rest.split_at(len.saturating_mul(dim).min(rest.len()));
            rest = tail;
            let mut rows = tokens.chunks_exact(dim);
            let pooled = match self {
                Self::Cls => rows.next().map_or_else(|| vec![0.0; dim], <[f32]>::to_vec),
                Self::Max => rows
                    .fold(None, |acc: Option<Vec<f32>>, row| {
                        Some(match acc {
                            None => row.to_vec(),
                            Some(mut max) => {
                                max.iter_mut().zip(row).for_each(|(m, &x)| *m = m.max(x));
                                max
                            }
                        })
                    })
                    .unwrap_or_else(|| vec![0.0; dim]),
                Self::Mean | Self::MeanSqrtLen => {
                    let mut sum = vec![0f32; dim];
                    for row in rows {
                        sum.iter_mut().zip(row).for_each(|(s, &x)| *s += x);
                    }
                    let count = len.max(1) as f32;
                    let divisor = if self == Self::Mean {
                        count
                    } else {
                        count.sqrt()
                    };
                    sum.iter_mut().for_each(|s| *s /= divisor);
                    sum
                }
            };
            texts.push(pooled);
        }
        texts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn each_text_pools_its_own_tokens() {
        // Three texts end to end: two tokens, none, one token (dim 2).
        let hidden = [1f32, -2.0, 3.0, 4.0, 100.0, -100.0];
        let lens = [2, 0, 1];
        let pooled = |p: Pooling| p.pool(&hidden, 2, &lens);
        let zero = vec![0.0, 0.0];
        assert_eq!(
            pooled(Pooling::Mean),
            vec![vec![2.0, 1.0], zero.clone(), vec![100.0, -100.0]]
        );
        assert_eq!(
            pooled(Pooling::Cls),
            vec![vec![1.0, -2.0], zero.clone(), vec![100.0, -100.0]]
        );
        assert_eq!(
            pooled(Pooling::Max),
            vec![vec![3.0, 4.0], zero.clone(), vec![100.0, -100.0]]
        );
        let s = 2f32.sqrt();
        assert_eq!(
            pooled(Pooling::MeanSqrtLen),
            vec![vec![4.0 / s, 2.0 / s], zero, vec![100.0, -100.0]]
        );
    }
}
