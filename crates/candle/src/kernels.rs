//! The arithmetic of a forward pass over plain row-major `f32` slices, on the calling thread:
//! dense layers and multi-head self-attention (matrix products by faer, `Par::Seq`), layer
//! norm, softmax.
//!
//! Nothing here starts or waits for another thread. candle's own CPU ops split each matrix
//! product, and each element-wise op over 64K values or more, between all cores and meet a few
//! hundred times per pass; on 2 cores a batch of short texts spent more time synchronising than
//! computing. Kept on one thread, whole passes run side by side instead, one per core
//! (`embedder.rs`).
//!
//! Every destination handed to faer is a whole contiguous matrix: faer 0.23 writes past the
//! end of a strided destination view (heap corruption seen here).

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

/// A shape that does not fit the layer.
pub(crate) type ShapeError = String;

/// A linear layer `x · Wᵀ + b` with the weight kept input-major (in × out, row-major), the
/// order the product reads it in.
pub(crate) struct Dense {
    /// in × out, row-major.
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Dense {
    /// From Hugging Face's out × in `weight` (row-major) and its `bias` (out).
    pub(crate) fn new(weight: &[f32], bias: Vec<f32>) -> Result<Self, ShapeError> {
        let outputs = bias.len();
        if outputs == 0 || weight.is_empty() || weight.len() % outputs != 0 {
            return Err(format!(
                "a dense layer's weight has {} values for {outputs} outputs",
                weight.len()
            ));
        }
        let inputs = weight.len() / outputs;
        let mut transposed = vec![0f32; weight.len()];
        for (o, row) in weight.chunks_exact(inputs).enumerate() {
            for (i, w) in row.iter().enumerate() {
                transposed[i * outputs + o] = *w;
            }
        }
        Ok(Self {
            weight: transposed,
            bias,
            inputs,
            outputs,
        })
    }

    /// `xs` (tokens × in) through the layer: tokens × out.
    pub(crate) fn forward(&self, xs: &[f32]) -> Result<Vec<f32>, ShapeError> {
        let tokens = self.tokens(xs)?;
        let mut out = Vec::with_capacity(tokens * self.outputs);
        for _ in 0..tokens {
            out.extend_from_slice(&self.bias);
        }
        self.accumulate(xs, tokens, &mut out);
        Ok(out)
    }

    /// `xs` (tokens × in) through the layer, plus `residual` (tokens × out), in one pass.
    pub(crate) fn forward_residual(
        &self,
        xs: &[f32],
        residual: &[f32],
    ) -> Result<Vec<f32>, ShapeError> {
        let tokens = self.tokens(xs)?;
        if residual.len() != tokens * self.outputs {
            return Err(format!(
                "dense layer: a residual of {} values for {tokens} × {} outputs",
                residual.len(),
                self.outputs
            ));
        }
        let mut out = residual.to_vec();
        for row in out.chunks_exact_mut(self.outputs) {
            row.iter_mut().zip(&self.bias).for_each(|(x, b)| *x += b);
        }
        self.accumulate(xs, tokens, &mut out);
        Ok(out)
    }

    fn tokens(&self, xs: &[f32]) -> Result<usize, ShapeError> {
        if xs.len() % self.inputs != 0 {
            return Err(format!(
                "dense layer: {} values are not rows of {} inputs",
                xs.len(),
                self.inputs
            ));
        }
        Ok(xs.len() / self.inputs)
    }

    /// `out += xs · W`.
    fn accumulate(&self, xs: &[f32], tokens: usize, out: &mut [f32]) {
        if tokens == 0 {
            return;
        }
        matmul(
            MatMut::from_row_major_slice_mut(out, tokens, self.outputs),
            Accum::Add,
            MatRef::from_row_major_slice(xs, tokens, self.inputs),
            MatRef::from_row_major_slice(&self.weight, self.inputs, self.outputs),
            1.0,
            Par::Seq,
        );
    }
}

/// Multi-head self-attention of each text over its own tokens. `qkv` holds every token's
/// (pre-scaled) query, key and value side by side (tokens × 3 · hidden), the texts end to end
/// as `lens` counts them; the result is the tokens × hidden context. The heads are read as
/// strided views of `qkv`, so nothing is copied before the products. `relative` (MPNet) adds
/// its learned bias to the scores by the distance between the two tokens. Scores take
/// `longest text²` floats (1 MiB at 512 tokens), allocated once per call.
pub(crate) fn attention(
    qkv: &[f32],
    lens: &[usize],
    heads: usize,
    relative: Option<&RelativeBias>,
) -> Result<Vec<f32>, ShapeError> {
    let tokens: usize = lens.iter().sum();
    let heads = heads.max(1);
    let width = qkv.len().checked_div(tokens).unwrap_or(0);
    let hidden = width / 3;
    if tokens * width != qkv.len()
        || (tokens > 0 && width == 0)
        || width % 3 != 0
        || hidden % heads != 0
        || relative.is_some_and(|r| r.heads != heads)
    {
        return Err(format!(
            "attention: {} values do not fit {heads} heads over texts of {lens:?} tokens",
            qkv.len()
        ));
    }
    let dim = hidden / heads;
    let mut out = vec![0f32; tokens * hidden];
    let longest = lens.iter().copied().max().unwrap_or(0);
    let mut scores = vec![0f32; longest * longest];
    let mut head_context = vec![0f32; longest * dim];
    let mut start = 0;
    for &len in lens {
        if len == 0 {
            continue;
        }
        let rows = &qkv[start * width..(start + len) * width];
        let context = &mut out[start * hidden..(start + len) * hidden];
        start += len;
        let scores = &mut scores[..len * len];
        let head_context = &mut head_context[..len * dim];
        // The bias table's row for each key-minus-query distance -(len-1)..=len-1, found once
        // per text rather than per score, head and layer.
        let distances = relative.map(|r| r.rows(len));
        for head in 0..heads {
            // len × dim views, one row per token, `width` apart.
            let part = |which: usize| {
                let offset = which * hidden + head * dim;
                MatRef::from_row_major_slice_with_stride(&rows[offset..], len, dim, width)
            };
            matmul(
                MatMut::from_row_major_slice_mut(scores, len, len),
                Accum::Replace,
                part(0),
                part(1).transpose(),
                1.0,
                Par::Seq,
            );
            for (i, row) in scores.chunks_exact_mut(len).enumerate() {
                if let (Some(relative), Some(distances)) = (relative, &distances) {
                    // Key j is j - i tokens after query i: entry j - i + len - 1.
                    let keys = &distances[len - 1 - i..2 * len - 1 - i];
                    for (score, &at) in row.iter_mut().zip(keys) {
                        *score += relative.table[at + head];
                    }
                }
                softmax(row);
            }
            matmul(
                MatMut::from_row_major_slice_mut(head_context, len, dim),
                Accum::Replace,
                MatRef::from_row_major_slice(scores, len, len),
                part(2),
                1.0,
                Par::Seq,
            );
            for (token, values) in head_context.chunks_exact(dim).enumerate() {
                let at = token * hidden + head * dim;
                context[at..at + dim].copy_from_slice(values);
            }
        }
    }
    Ok(out)
}

/// MPNet's relative position bias: a learned value per (bucket, head) added to the attention
/// score of a query token and a key token, the bucket chosen by their distance (exact up to a
/// quarter of the buckets each way, then logarithmic up to 128 tokens, then the last bucket),
/// before and after told apart.
pub(crate) struct RelativeBias {
    /// buckets × heads, row-major.
    table: Vec<f32>,
    buckets: usize,
    heads: usize,
}

/// Distances of this many tokens or more share the last bucket of their side.
const MAX_DISTANCE: f64 = 128.0;

impl RelativeBias {
    pub(crate) fn new(table: Vec<f32>, buckets: usize, heads: usize) -> Result<Self, ShapeError> {
        if buckets < 4 || table.len() != buckets * heads {
            return Err(format!(
                "relative attention bias: {} values for {buckets} buckets × {heads} heads",
                table.len()
            ));
        }
        Ok(Self {
            table,
            buckets,
            heads,
        })
    }

    /// The bucket of a key `relative` tokens after the query (negative: before it).
    pub(crate) fn bucket(&self, relative: isize) -> usize {
        let half = self.buckets / 2;
        let exact = half / 2;
        // Keys after the query take the upper half.
        let side = if relative > 0 { half } else { 0 };
        let distance = relative.unsigned_abs();
        if distance < exact {
            return side + distance;
        }
        let scaled = (distance as f64 / exact as f64).ln() / (MAX_DISTANCE / exact as f64).ln()
            * (half - exact) as f64;
        side + (exact + scaled as usize).min(half - 1)
    }

    /// For a text of `len` tokens, the offset in `table` of the bucket of each key-minus-query
    /// distance from -(len - 1) to len - 1 (add the head to read its value).
    fn rows(&self, len: usize) -> Vec<usize> {
        (0..(2 * len).saturating_sub(1))
            .map(|d| self.bucket(d as isize - (len as isize - 1)) * self.heads)
            .collect()
    }
}

/// Layer normalisation over each row (`weight.len()` values) of a row-major matrix.
pub(crate) struct Norm {
    pub(crate) weight: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) eps: f32,
}

impl Norm {
    /// Normalise every row of `xs` in place.
    pub(crate) fn apply(&self, xs: &mut [f32]) {
        let width = self.weight.len().max(1);
        for row in xs.chunks_exact_mut(width) {
            let n = row.len() as f32;
            let mean = row.iter().sum::<f32>() / n;
            let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
            let scale = 1.0 / (var + self.eps).sqrt();
            for ((x, w), b) in row.iter_mut().zip(&self.weight).zip(&self.bias) {
                *x = (*x - mean) * scale * w + b;
            }
        }
    }
}

/// Softmax of one row of scores, in place.
fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    row.iter_mut().for_each(|x| *x = exp(*x - max));
    let sum: f32 = row.iter().sum();
    if sum > 0.0 {
        let scale = 1.0 / sum;
        row.iter_mut().for_each(|x| *x *= scale);
    }
}

/// eˣ for f32 within 2e-7 relative error, in straight-line arithmetic the compiler vectorises
/// over a row (libm's `expf` is a call per element: a fifth of a long text's embedding time).
/// `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, a degree-6 polynomial for `eʳ`, and `2ⁿ` built from
/// its exponent bits. Inputs are clamped to where the result is a normal f32.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, so `n · LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5 · 2²³ rounds to the nearest integer without a rounding
    // instruction (which the baseline x86-64 target lacks).
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2_E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0 / 720.0;
    let p = p * r + 1.0 / 120.0;
    let p = p * r + 1.0 / 24.0;
    let p = p * r + 1.0 / 6.0;
    let p = p * r + 0.5;
    let p = p * r + 1.0;
    let p = p * r + 1.0;
    // n ∈ [-126, 127] after the clamp: a normal power of two.
    let bits = ((n as i32 + 127) as u32) << 23;
    p * f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_float_noise_of_libm() {
        let mut worst = 0f64;
        for i in -870_000..=880_000 {
            let x = i as f32 / 10_000.0;
            let exact = f64::from(x).exp();
            let err = ((f64::from(exp(x)) - exact) / exact).abs();
            worst = worst.max(err);
        }
        assert!(worst < 5e-7, "max relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1_000.0) < 1e-37 && exp(-1_000.0) >= 0.0);
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn relative_buckets_are_hugging_faces() {
        // `MPNetEncoder.relative_position_bucket` (transformers 5, 32 buckets) over key minus
        // query positions -400..=400, as (bucket, run length).
        const RUNS: &[(usize, usize)] = &[
            (15, 310),
            (14, 27),
            (13, 18),
            (12, 14),
            (11, 9),
            (10, 7),
            (9, 4),
            (8, 4),
            (7, 1),
            (6, 1),
            (5, 1),
            (4, 1),
            (3, 1),
            (2, 1),
            (1, 1),
            (0, 1),
            (17, 1),
            (18, 1),
            (19, 1),
            (20, 1),
            (21, 1),
            (22, 1),
            (23, 1),
            (24, 4),
            (25, 4),
            (26, 7),
            (27, 9),
            (28, 14),
            (29, 18),
            (30, 27),
            (31, 310),
        ];
        let relative = RelativeBias::new(vec![0.0; 32 * 2], 32, 2).unwrap();
        let expected: Vec<usize> = RUNS
            .iter()
            .flat_map(|&(bucket, n)| std::iter::repeat_n(bucket, n))
            .collect();
        let ours: Vec<usize> = (-400..=400).map(|r| relative.bucket(r)).collect();
        assert_eq!(ours, expected);
        assert!(RelativeBias::new(vec![0.0; 5], 32, 2).is_err());
    }

    #[test]
    fn softmax_rows_sum_to_one_and_keep_their_order() {
        let mut row = vec![3.0, -1.0, 0.5, 3.0, -80.0, 12.0];
        softmax(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let exact: Vec<f64> = [3.0f64, -1.0, 0.5, 3.0, -80.0, 12.0]
            .iter()
            .map(|x| (x - 12.0).exp())
            .collect();
        let total: f64 = exact.iter().sum();
        for (ours, e) in row.iter().zip(&exact) {
            assert!(
                (f64::from(*ours) - e / total).abs() < 1e-7,
                "{ours} vs {}",
                e / total
            );
        }
    }

    #[test]
    fn attention_matches_plain_loops() {
        // A 2-head attention over texts of 3, 0 and 2 tokens (hidden 4), without and with a
        // relative position bias, against its definition computed in f64.
        let (hidden, heads, lens) = (4usize, 2usize, [3usize, 0, 2]);
        let tokens: usize = lens.iter().sum();
        let qkv: Vec<f32> = (0..tokens * 3 * hidden)
            .map(|i| ((i * 37) % 23) as f32 / 10.0 - 1.1)
            .collect();
        let table: Vec<f32> = (0..8 * heads).map(|i| (i % 5) as f32 / 4.0 - 0.5).collect();
        let bias = RelativeBias::new(table, 8, heads).unwrap();
        for relative in [None, Some(&bias)] {
            check_attention(&qkv, &lens, heads, hidden, relative);
        }
        assert!(
            attention(&qkv, &lens, 3, Some(&bias)).is_err(),
            "heads must match the bias"
        );
    }

    fn check_attention(
        qkv: &[f32],
        lens: &[usize],
        heads: usize,
        hidden: usize,
        relative: Option<&RelativeBias>,
    ) {
        let ours = attention(qkv, lens, heads, relative).unwrap();
        let dim = hidden / heads;
        assert!(attention(&[0.0; 10], &[1], 2, None).is_err());
        assert!(attention(&[], &[2], 2, None).is_err());
        assert!(attention(&[], &[0, 0], 2, None).unwrap().is_empty());
        let at = |tok: usize, which: usize, h: usize, d: usize| {
            f64::from(qkv[tok * 3 * hidden + which * hidden + h * dim + d])
        };
        let mut start = 0;
        for &len in lens {
            for h in 0..heads {
                for i in 0..len {
                    let scores: Vec<f64> = (0..len)
                        .map(|j| {
                            (0..dim)
                                .map(|d| at(start + i, 0, h, d) * at(start + j, 1, h, d))
                                .sum::<f64>()
                                + relative.map_or(0.0, |r| {
                                    let bucket = r.bucket(j as isize - i as isize);
                                    f64::from(r.table[bucket * r.heads + h])
                                })
                        })
                        .collect();
                    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = e.iter().sum();
                    for d in 0..dim {
                        let want: f64 = (0..len)
                            .map(|j| e[j] / total * at(start + j, 2, h, d))
                            .sum();
                        let got = f64::from(ours[(start + i) * hidden + h * dim + d]);
                        assert!(
                            (got - want).abs() < 1e-5,
                            "token {i} head {h}: {got} vs {want}"
                        );
                    }
                }
            }
            start += len;
        }
    }

    #[test]
    fn dense_and_norm_match_plain_loops() {
        let qkv: Vec<f32> = (0..12)
            .map(|i| ((i * 37) % 23) as f32 / 10.0 - 1.1)
            .collect();
        // out × in = 6 × 4, Hugging Face's order.
        let weight: Vec<f32> = (0..6 * 4).map(|i| (i % 7) as f32 / 3.0 - 1.0).collect();
        let bias = vec![0.5f32, -1.0, 0.0, 2.0, 1.0, -0.25];
        let dense = Dense::new(&weight, bias.clone()).unwrap();
        let xs = &qkv[..3 * 4];
        let residual: Vec<f32> = (0..3 * 6).map(|i| i as f32 / 4.0).collect();
        let plain = dense.forward(xs).unwrap();
        let with_residual = dense.forward_residual(xs, &residual).unwrap();
        for t in 0..3 {
            for o in 0..6 {
                let want: f32 = bias[o]
                    + (0..4)
                        .map(|i| xs[t * 4 + i] * weight[o * 4 + i])
                        .sum::<f32>();
                assert!((plain[t * 6 + o] - want).abs() < 1e-5);
                let want = want + residual[t * 6 + o];
                assert!((with_residual[t * 6 + o] - want).abs() < 1e-5);
            }
        }

        let norm = Norm {
            weight: vec![1.0, 2.0, 0.5, 1.0],
            bias: vec![0.0, 1.0, 0.0, -1.0],
            eps: 1e-12,
        };
        let mut rows = vec![1.0f32, 2.0, 3.0, 4.0, -5.0, 0.0, 5.0, 0.0];
        norm.apply(&mut rows);
        for (row, input) in rows
            .chunks(4)
            .zip([[1.0f64, 2.0, 3.0, 4.0], [-5.0, 0.0, 5.0, 0.0]])
        {
            let mean = input.iter().sum::<f64>() / 4.0;
            let sd = (input.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
            for (k, got) in row.iter().enumerate() {
                let want =
                    (input[k] - mean) / sd * [1.0, 2.0, 0.5, 1.0][k] + [0.0, 1.0, 0.0, -1.0][k];
                assert!((f64::from(*got) - want).abs() < 1e-5, "{got} vs {want}");
            }
        }

        // Shapes that do not fit are errors, not panics.
        assert!(dense.forward(&[0.0; 5]).is_err());
        assert!(dense.forward_residual(xs, &[0.0; 4]).is_err());
        assert!(Dense::new(&[0.0; 7], vec![0.0; 2]).is_err());
        assert!(Dense::new(&[], vec![0.0; 2]).is_err());
        assert!(dense.forward(&[]).unwrap().is_empty());
    }
}
