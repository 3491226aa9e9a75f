//! GELU with the exact error function (BERT's `hidden_act: gelu`).
//!
//! candle's own `gelu_erf` calls libm's `erff` once per element, a branchy scalar routine that
//! took a large share of a MiniLM forward pass. This evaluates the rational approximation of
//! erf that Eigen and XLA use for f32 (odd degree-13 numerator over even degree-8 denominator,
//! inputs clamped to ±4 where erf is ±1 in f32; absolute error below 5e-7, a few f32 ulps): multiplications,
//! additions and one division, in a loop the compiler vectorises.

/// `x · Φ(x) = x/2 · (1 + erf(x/√2))` element-wise, in place.
pub(crate) fn gelu_erf(xs: &mut [f32]) {
    xs.iter_mut().for_each(|x| *x = gelu(*x));
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf(x) for f32, absolute error below 5e-7 (written with separate multiplications and
/// additions: `mul_add` without a target FMA would call libm).
#[inline(always)]
fn erf(x: f32) -> f32 {
    // Eigen's `generic_fast_erf_float` coefficients, highest power first.
    const ALPHA: [f32; 7] = [
        -2.726_142_4e-10,
        2.770_681_5e-8,
        -2.101_024e-6,
        -5.692_506_2e-5,
        -7.349_906_4e-4,
        -2.954_6e-3,
        -1.609_603_3e-2,
    ];
    const BETA: [f32; 5] = [
        -1.456_607_15e-5,
        -2.133_740_5e-4,
        -1.682_827e-3,
        -7.373_329_3e-3,
        -1.426_473_9e-2,
    ];
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = ALPHA[0];
    for a in &ALPHA[1..] {
        p = p * x2 + a;
    }
    let mut q = BETA[0];
    for b in &BETA[1..] {
        q = q * x2 + b;
    }
    x * p / q
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    #[test]
    fn erf_is_within_float_noise_of_the_exact_one() {
        let mut worst = 0f64;
        for i in -80_000..=80_000 {
            let x = i as f32 / 10_000.0;
            let err = (f64::from(erf(x)) - libm::erf(f64::from(x))).abs();
            worst = worst.max(err);
        }
        // A few f32 ulps of 1 (6e-8): float noise.
        assert!(worst < 5e-7, "max |erf error| {worst}");
        assert_eq!(erf(f32::INFINITY), erf(4.0));
        assert!(erf(f32::NAN).is_nan());
    }

    #[test]
    fn matches_candles_gelu_erf() {
        let values: Vec<f32> = (-1200..1200).map(|i| i as f32 / 100.0).collect();
        let theirs = Tensor::from_vec(values.clone(), values.len(), &Device::Cpu)
            .unwrap()
            .gelu_erf()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let mut ours = values;
        gelu_erf(&mut ours);
        let diff = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(diff < 2e-6, "{diff}");
    }
}
