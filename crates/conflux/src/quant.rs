//! Quantized convolution: what int8 and fp8 tensors mean, in one place. The f64 reference,
//! the CPU kernels and `miopen.h` all follow these rules.
//!
//! **int8** (forward only): x and w `Int8`; products accumulated exactly in i32. The output
//! is `Int32`, `Float`, `Half`, `BFloat16` or `Int8`. The value before the final conversion is
//! `v = α·acc + β·y_old` in f32 (β = 0 never reads y), then the fusion epilogue (bias, BN
//! inference, activation, residual add) in f32. `Int8` outputs are requantized from v: round
//! half to even, saturate to [−128, 127], NaN → 0. `Int32` outputs store the accumulator
//! itself (exact) when α = 1, β = 0 and there is no epilogue; otherwise v rounded half to even
//! and saturated to the i32 range. The i32 accumulator is exact for reductions of up to 2^17
//! products (|x·w| ≤ 2^14); solvers refuse longer ones.
//!
//! **fp8** (forward only): x and w each `Float8` (OCP e4m3fn: bias 7, finite max 448, no
//! infinities, NaN = 0x7f / 0xff) or `BFloat8` (e5m2: bias 15, max 57344, ±inf 0x7c / 0xfc,
//! NaN 0x7d–0x7f / 0xfd–0xff). Inputs are converted to f32 exactly, products accumulated in
//! f32; `v` and the epilogue as for int8; the output is `Float`, `Half`, `BFloat16`, `Float8`
//! or `BFloat8`. f32 → fp8: round to nearest even (`FP8_ROUNDING_MODE` 0) or stochastic
//! rounding (1, MIOpen's default), both saturating finite overflow to ±max; ±inf becomes ±max
//! in e4m3 (which has none) and stays ±inf in e5m2; NaN becomes the canonical NaN (0x7f e4m3,
//! 0x7e e5m2) with the sign kept.
//!
//! Stochastic rounding is reproducible: the random bits of output element number `i` (its
//! logical N,C,(D,)H,W row-major index, whatever the layout) are the top 24 bits of
//! `splitmix64(i ^ STOCHASTIC_SEED)`, so reruns, thread counts and layouts give the same
//! bits. A value is rounded away from zero when those bits, read as an integer r in
//! [0, 2^24), satisfy r < frac·2^24, where frac is its distance above the lower code in units
//! of the code spacing: exact values never move.

use crate::error::Result;
use crate::ensure;
use crate::tensor::TensorDesc;
use crate::types::{DataType, Direction};

/// Seed of the stochastic-rounding bit stream (see the module comment).
pub const STOCHASTIC_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// Longest reduction (products per output) the i32 accumulator is exact for.
pub const INT8_MAX_REDUCTION: usize = 1 << 17;

/// The two 8-bit float formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8 {
    /// `miopenFloat8`: e4m3fn.
    E4M3,
    /// `miopenBFloat8`: e5m2.
    E5M2,
}

/// f32 → fp8 rounding (`MIOPEN_CONVOLUTION_ATTRIB_FP8_ROUNDING_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    Nearest,
    /// Stochastic with these 24 random bits.
    Stochastic(u32),
}

impl Fp8 {
    pub fn of(dt: DataType) -> Option<Fp8> {
        match dt {
            DataType::Float8 => Some(Fp8::E4M3),
            DataType::BFloat8 => Some(Fp8::E5M2),
            _ => None,
        }
    }
    fn man_bits(self) -> i32 { if self == Fp8::E4M3 { 3 } else { 2 } }
    fn bias(self) -> i32 { if self == Fp8::E4M3 { 7 } else { 15 } }
    /// Largest finite value.
    pub fn max(self) -> f32 { if self == Fp8::E4M3 { 448.0 } else { 57344.0 } }
    /// Code of the largest finite value (positive).
    fn max_code(self) -> u8 { if self == Fp8::E4M3 { 0x7e } else { 0x7b } }
    fn nan_code(self) -> u8 { if self == Fp8::E4M3 { 0x7f } else { 0x7e } }

    /// The exact value of `code`.
    pub fn decode(self, code: u8) -> f32 {
        let neg = code & 0x80 != 0;
        let mb = self.man_bits();
        let e = ((code & 0x7f) >> mb) as i32;
        let m = (code & ((1 << mb) - 1)) as i32;
        let emax_field = (1 << (7 - mb)) - 1;
        let mag = match self {
            Fp8::E4M3 if e == emax_field && m == (1 << mb) - 1 => f32::NAN,
            Fp8::E5M2 if e == emax_field => if m == 0 { f32::INFINITY } else { f32::NAN },
            _ if e == 0 => m as f32 * pow2(1 - self.bias() - mb),
            _ => (1.0 + m as f32 / (1 << mb) as f32) * pow2(e - self.bias()),
        };
        if neg { -mag } else { mag }
    }

    /// `v` as the nearest code under `rounding` (saturating; see the module comment).
    pub fn encode(self, v: f32, rounding: Rounding) -> u8 {
        let sign = if v.is_sign_negative() { 0x80 } else { 0 };
        if v.is_nan() {
            return sign | self.nan_code();
        }
        let a = v.abs() as f64;
        if v.is_infinite() && self == Fp8::E5M2 {
            return sign | 0x7c;
        }
        if a >= self.max() as f64 {
            return sign | self.max_code();
        }
        let mb = self.man_bits();
        let emin = 1 - self.bias();
        // Code spacing in the binade of a (the subnormal spacing below 2^emin). A subnormal
        // count of 2^mb is the smallest normal's code, and a normal count of 2^(mb+1) the next
        // binade's first code, so `code = base + n` needs no special case at either seam.
        let e = if a < pow2(emin) as f64 { emin } else { exponent(a).max(emin) };
        let q = pow2(e - mb) as f64;
        let t = a / q; // exact: q is a power of two
        let n = match rounding {
            Rounding::Nearest => t.round_ties_even(),
            Rounding::Stochastic(bits) => {
                let lo = t.floor();
                let frac = t - lo;
                if ((bits & 0xff_ffff) as f64) < frac * (1u32 << 24) as f64 { lo + 1.0 } else { lo }
            }
        } as u32;
        let base = if a < pow2(emin) as f64 { 0 } else { ((e - emin) as u32) << mb };
        let code = base + n;
        sign | (code.min(self.max_code() as u32) as u8)
    }
}

/// 2^e as f32 for the exponents fp8 needs.
fn pow2(e: i32) -> f32 { f32::from_bits(((e + 127) as u32) << 23) }

/// floor(log2(a)) for a normal positive f64.
fn exponent(a: f64) -> i32 { ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023 }

/// The 24 random bits of output element `index` (see the module comment).
pub fn stochastic_bits(index: u64) -> u32 {
    let mut z = index ^ STOCHASTIC_SEED;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as u32
}

/// f32 → int8: round half to even, saturate, NaN → 0.
pub fn to_i8(v: f32) -> i8 {
    if v.is_nan() { 0 } else { v.round_ties_even().clamp(-128.0, 127.0) as i8 }
}

/// f32 → int32: round half to even, saturate, NaN → 0.
pub fn to_i32(v: f32) -> i32 {
    // `as` saturates and maps NaN to 0 after the rounding.
    v.round_ties_even() as i32
}

/// What a quantized convolution computes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quant {
    /// int8 x and w, i32 accumulation.
    Int8,
    /// fp8 x and w (each format on its own), f32 accumulation.
    Fp8 { x: Fp8, w: Fp8 },
}

/// Output types of int8 convolutions.
pub const INT8_OUTPUTS: &[DataType] = &[DataType::Int32, DataType::Float, DataType::Half, DataType::BFloat16, DataType::Int8];
/// Output types of fp8 convolutions.
pub const FP8_OUTPUTS: &[DataType] = &[DataType::Float, DataType::Half, DataType::BFloat16, DataType::Float8, DataType::BFloat8];

/// Is `dt` an 8-bit input type of a quantized convolution?
pub fn is_quantized_input(dt: DataType) -> bool {
    matches!(dt, DataType::Int8 | DataType::Float8 | DataType::BFloat8)
}

/// The quantized kind of a convolution with normal-role tensors x, w, y, None for a
/// floating-point one, or the reason the types do not form a convolution conflux computes.
/// `direction` is the normal convolution's (a transpose forward is a backward-data).
pub fn conv_types(op: &str, direction: Direction, x: &TensorDesc, w: &TensorDesc, y: &TensorDesc) -> Result<Option<Quant>> {
    let (xt, wt, yt) = (x.dtype(), w.dtype(), y.dtype());
    let written = match direction {
        Direction::Forward => yt,
        Direction::BackwardData => xt,
        Direction::BackwardWeights => wt,
    };
    let eight = [xt, wt, yt].into_iter().any(is_quantized_input) || written == DataType::Int32;
    if !eight {
        return Ok(None);
    }
    ensure!(
        direction == Direction::Forward,
        BadParm,
        "{op}: int8 and fp8 convolutions are forward only (this problem runs as the normal convolution's {}; a transpose forward is one)",
        match direction {
            Direction::BackwardData => "backward-data",
            Direction::BackwardWeights => "backward-weights",
            Direction::Forward => "forward",
        }
    );
    let q = match (xt, wt) {
        (DataType::Int8, DataType::Int8) => Quant::Int8,
        (a, b) if Fp8::of(a).is_some() && Fp8::of(b).is_some() => Quant::Fp8 { x: Fp8::of(a).unwrap(), w: Fp8::of(b).unwrap() },
        _ => crate::bail!(
            BadParm,
            "{op}: input type {xt:?} with filter type {wt:?}: a quantized convolution takes Int8 x and w, or Float8/BFloat8 x and w"
        ),
    };
    let outs = if q == Quant::Int8 { INT8_OUTPUTS } else { FP8_OUTPUTS };
    ensure!(outs.contains(&yt), BadParm, "{op}: output type {yt:?} with {xt:?} inputs; the outputs are {outs:?}");
    Ok(Some(q))
}

#[cfg(test)]
mod tests;
