//! Seeded test data with a tiny self-contained PRNG (SplitMix64), so every test input is
//! reproducible from its seed without a crate dependency.
//!
//! Exact-integer rule: `fill_small_int` gives integers (e.g. in [−2, 2]). A convolution of
//! such data is computed exactly — bit for bit in any summation order — as long as every
//! partial sum and the result are integers the types can hold: |result| ≤ max|x|·max|w|·
//! (C/G·Πk) must stay ≤ 2^24 for f32, ≤ 2^11 = 2048 for f16 and ≤ 2^8 = 256 for bf16 (the
//! significand widths; f32 accumulation keeps the partial sums exact, the narrow output
//! must hold the result). `exact_integer_limit` returns that bound.

use crate::tensor::TensorDesc;
use crate::types::DataType;

/// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit state, one add and a mixing function;
/// passes BigCrush, which is far more than test data needs.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform integer in [lo, hi] (inclusive). Modulo bias is < 2^-50 for small ranges.
    pub fn next_int(&mut self, lo: i64, hi: i64) -> i64 {
        assert!(lo <= hi, "next_int: empty range {lo}..={hi}");
        let span = (hi - lo) as u64 + 1;
        lo + (self.next_u64() % span) as i64
    }
    /// Standard normal by Box–Muller (one of the pair is used; simplicity over speed).
    pub fn next_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1], so ln is finite
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// n standard-normal values.
pub fn fill_normal(seed: u64, n: usize) -> Vec<f64> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_normal()).collect()
}

/// n values uniform in [lo, hi).
pub fn fill_uniform(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| lo + (hi - lo) * r.next_f64()).collect()
}

/// n integers uniform in [lo, hi] (inclusive), as f64 — exact in every float type for small
/// ranges (see the module comment for when sums of products stay exact).
pub fn fill_small_int(seed: u64, n: usize, lo: i64, hi: i64) -> Vec<f64> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_int(lo, hi) as f64).collect()
}

/// Largest integer magnitude up to which every integer is representable in `dtype`
/// (2^significand bits); integer results within it are computed exactly.
pub fn exact_integer_limit(dtype: DataType) -> f64 {
    match dtype {
        DataType::Double => 9_007_199_254_740_992.0, // 2^53
        DataType::Float => 16_777_216.0,             // 2^24
        DataType::Half => 2048.0,                    // 2^11
        DataType::BFloat16 => 256.0,                 // 2^8
        DataType::Float8 => 16.0,                    // e4m3: 2^4
        DataType::BFloat8 => 8.0,                    // e5m2: 2^3
        DataType::Int8 => 127.0,
        DataType::Int32 => 2_147_483_647.0,
        DataType::Int64 => 9_007_199_254_740_992.0, // as f64 values
    }
}

/// What `fill_for` puts in the covered elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    Normal,
    Uniform(f64, f64),
    SmallInt(i64, i64),
    Const(f64),
}

/// A buffer of `desc.element_space()` values: the elements the strides reach get seeded
/// data (in row-major logical order), every gap between them gets NaN, so a kernel that
/// reads outside the described elements produces NaN and fails the comparison.
pub fn fill_for(desc: &TensorDesc, fill: Fill, seed: u64) -> Vec<f64> {
    let n = desc.element_count();
    let values = match fill {
        Fill::Normal => fill_normal(seed, n),
        Fill::Uniform(lo, hi) => fill_uniform(seed, n, lo, hi),
        Fill::SmallInt(lo, hi) => fill_small_int(seed, n, lo, hi),
        Fill::Const(v) => vec![v; n],
    };
    super::strided::scatter(desc, &values)
}

/// An output buffer for `desc` poisoned with NaN everywhere, so an element the kernel fails
/// to write stays NaN and is caught.
pub fn poisoned(desc: &TensorDesc) -> Vec<f64> {
    vec![f64::NAN; desc.element_space()]
}
