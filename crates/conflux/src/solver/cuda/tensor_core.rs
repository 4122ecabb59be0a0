//! What the tensor-core solvers share: the precision a problem multiplies in, the layout
//! conditions of the channels-last kernels, their preamble defines, and how the wgmma kernels
//! stage a finished tile.

use crate::backend::cuda::preamble;
use crate::problem::{ConvProblem, FusedProblem, Geom};
use crate::types::{DataType, Direction};

/// What both tensor-core kernels (mma.sync in `igemm_mma`, wgmma in `igemm_wgmma`) need: 16-bit
/// data, forward, channels-last x and w whose 8-channel chunks are 16-byte copies.
pub(crate) fn tensor_core_check(problem: &FusedProblem) -> std::result::Result<Geom, String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    if !matches!(conv.dtype(), DataType::Half | DataType::BFloat16) {
        return Err(format!("tensor cores need f16 or bf16 data ({:?} given)", conv.dtype()));
    }
    tensor_core_layout(conv)
}

/// How the TMA tensor-core kernel (and the adapters that feed it) multiplies a problem's
/// elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcPrecision {
    /// f16 or bf16 operands.
    Bits16,
    /// f32 data on TF32 tensor cores: the descriptor allows TF32.
    Tf32,
    /// Strict f32 on TF32 tensor cores: each operand is split into a TF32 high part and a
    /// TF32 low part and every product is three TF32 products (hi·hi + hi·lo + lo·hi), which
    /// keeps f32 accuracy (kernels/tf32_split.cuh).
    Tf32x3,
    /// int8 operands, exact i32 sums (TMA kernel only; `quant.rs`).
    Int8,
    /// fp8 operands (e4m3 / e5m2, each operand its own), f32 sums (TMA kernel only).
    Fp8,
}

impl TcPrecision {
    pub fn elem(self) -> usize {
        match self {
            TcPrecision::Bits16 => 2,
            TcPrecision::Tf32 | TcPrecision::Tf32x3 => 4,
            TcPrecision::Int8 | TcPrecision::Fp8 => 1,
        }
    }
    /// Bytes per element of a staged output tile: quantized kernels stage only 16-bit y
    /// (other outputs go from registers).
    pub fn stage_elem(self) -> usize { self.elem().max(2) }
    /// Operands of 8 or 16 bits (one wgmma instruction reads 16 or 32 of their k values).
    pub fn narrow(self) -> bool { matches!(self, TcPrecision::Bits16 | TcPrecision::Int8 | TcPrecision::Fp8) }
    /// Filter tiles per pipeline stage: the split precision loads w's high and low parts.
    pub fn b_tiles(self) -> usize {
        if self == TcPrecision::Tf32x3 { 2 } else { 1 }
    }
}

/// The element types the TMA tensor-core kernel multiplies: f16 and bf16, f32 on TF32 tensor
/// cores when the descriptor allows it, and strict f32 as split TF32 products.
pub(crate) fn tensor_core_precision(conv: &ConvProblem) -> std::result::Result<TcPrecision, String> {
    match conv.dtype() {
        DataType::Half | DataType::BFloat16 => Ok(TcPrecision::Bits16),
        DataType::Float if conv.conv.allows_tf32() => Ok(TcPrecision::Tf32),
        DataType::Float => Ok(TcPrecision::Tf32x3),
        dt => Err(format!("tensor cores need f16, bf16 or f32 data ({dt:?} given)")),
    }
}

/// The layout conditions of the tensor-core kernels for any element type: forward,
/// channels-last x and w with channels per group and every pixel row in whole 16-byte
/// chunks, 32-bit tile indexing.
pub(crate) fn tensor_core_layout(conv: &ConvProblem) -> std::result::Result<Geom, String> {
    if conv.direction != Direction::Forward {
        return Err(format!("forward only (this is {:?})", conv.direction));
    }
    let g = Geom::of(conv);
    let chunk = 16 / conv.dtype().size();
    if g.cg() % chunk != 0 {
        return Err(format!("channels per group ({}) not a multiple of {chunk}", g.cg()));
    }
    let aligned = |s: &[usize; 5]| s[1] == 1 && [s[0], s[2], s[3], s[4]].iter().all(|v| v % chunk == 0);
    if !aligned(&g.x_strides) || !aligned(&g.w_strides) {
        return Err("x and w must be channels-last with 16-byte aligned pixel rows".into());
    }
    let m = g.n * g.output_size();
    let biggest = [g.n * g.x_strides[0], g.k * g.w_strides[0], m, g.kg() * g.cg() * g.filter_size()];
    if biggest.iter().any(|&v| v >= i32::MAX as usize / 2) {
        return Err("tensor too large for 32-bit tile indexing".into());
    }
    Ok(g)
}

/// Preamble defines shared by both tensor-core kernels: geometry, tile, store mode, MMA type.
pub(crate) fn tensor_core_defines(g: &Geom, dt: DataType, tile: &[(&str, usize)]) -> (Vec<(String, String)>, bool) {
    let ys = g.y_strides;
    let pair_store = ys[1] == 1 && [ys[0], ys[2], ys[3], ys[4]].iter().all(|v| v % 2 == 0) && (g.kg() % 2 == 0 || g.groups == 1);
    let mma = match dt {
        DataType::Half => "\"f16\"",
        DataType::Float => "\"tf32\"",
        DataType::Int8 => "\"s8\"",
        DataType::Float8 => "\"e4m3\"",
        DataType::BFloat8 => "\"e5m2\"",
        _ => "\"bf16\"",
    };
    let mut defs = preamble::conv_geometry_defines(g);
    for (name, v) in tile.iter().copied().chain([("PAIR_STORE", pair_store as usize)]) {
        defs.push((name.to_string(), v.to_string()));
    }
    defs.push(("MMA_AB".into(), mma.into()));
    defs.push(("MMA_TF32".into(), ((dt == DataType::Float) as usize).to_string()));
    defs.push(("MMA_I8".into(), ((dt == DataType::Int8) as usize).to_string()));
    defs.push(("MMA_F8".into(), (matches!(dt, DataType::Float8 | DataType::BFloat8) as usize).to_string()));
    (defs, pair_store)
}

/// How the wgmma kernels stage a finished tile in shared memory before storing it, by y's
/// strides (wgmma_epilogue.cuh).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Staging {
    /// No staging: values go to y straight from registers (channel pairs when PAIR_STORE).
    Direct,
    /// Channels-last y: each pixel's channels are stored as 16-byte chunks.
    Rows,
    /// Each channel's pixels contiguous in y (NCHW): stored as runs along pixels, 16-byte
    /// runs of 8 when `vec` (images of a multiple of 8 pixels, 8-element aligned strides).
    Runs { vec: bool },
}

impl Staging {
    pub(crate) fn of(g: &Geom) -> Staging { Staging::of_elem(g, 2) }

    /// As `of` for y elements of `elem` bytes: staged rows are stored in 16-byte chunks.
    pub(crate) fn of_elem(g: &Geom, elem: usize) -> Staging {
        let (ys, [od, oh, ow]) = (g.y_strides, g.output);
        let chunk = (16 / elem).max(8);
        if ys[1] == 1 && [ys[0], ys[2], ys[3], ys[4]].iter().all(|v| v % chunk == 0) && (g.kg() % chunk == 0 || g.groups == 1) {
            return Staging::Rows;
        }
        if ys[4] == 1 && ys[3] == ow && (od == 1 || ys[2] == oh * ow) {
            return Staging::Runs { vec: (od * oh * ow) % 8 == 0 && ys[0] % 8 == 0 && ys[1] % 8 == 0 };
        }
        Staging::Direct
    }
    /// STAGE_STORE, STAGE_CM (channel-major runs) and CM_VEC for the kernel's preamble.
    pub(crate) fn defines(self) -> [(&'static str, usize); 3] {
        let (cm, vec) = match self {
            Staging::Runs { vec } => (true, vec),
            _ => (false, false),
        };
        [("STAGE_STORE", (self != Staging::Direct) as usize), ("STAGE_CM", cm as usize), ("CM_VEC", vec as usize)]
    }
    /// Alignment (bytes) the stores need of y, for elements of `elem` bytes.
    pub(crate) fn y_align(self, pair_store: bool, elem: usize) -> u64 {
        let elem = elem as u64;
        match self {
            Staging::Rows | Staging::Runs { vec: true } => 16,
            Staging::Runs { vec: false } => elem,
            Staging::Direct if pair_store => 2 * elem,
            Staging::Direct => elem,
        }
    }
}
