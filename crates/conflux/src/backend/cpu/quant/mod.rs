//! The quantized (int8 and fp8) forward convolution on the CPU, following `quant.rs`: for each
//! output row (n, d, h) and group, the input patches of up to `CHUNK` output pixels are
//! gathered into rows of `C/G · taps` elements (int8 as is, fp8 decoded to f32; zeros in the
//! padding), each filter row is dotted with four patch rows at a time (`dot.rs`; with AVX-512
//! VNNI, u8 panels of 32 pixels against 8 filters at a time, `vnni.rs`), and the
//! sums pass through α/β, the epilogue (f32) and the output conversion into y's strides.
//! Any geometry: 2-D / 3-D, groups, stride, padding (asymmetric too), dilation, any strides.

pub mod dot;
pub mod vnni;
mod vnni_direct;

use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::tensor_io::access;
use crate::problem::Geom;
use crate::quant::{stochastic_bits, to_i32, to_i8, Fp8, Quant, Rounding};
use crate::types::DataType;
use dot::{dot4_f32, dot4_i8, F32_STEP, INT8_STEP};
use rayon::prelude::*;

/// Output pixels gathered at once (bounds the patch buffer).
const CHUNK: usize = 64;

/// One run's pointers and scalars.
pub struct QuantRun<'a> {
    pub x: u64,
    pub w: u64,
    pub y: u64,
    pub y_dtype: DataType,
    pub alpha: f32,
    pub beta: f32,
    pub epi: &'a CpuEpilogue,
    /// FP8_ROUNDING_MODE = 1: fp8 outputs are rounded stochastically.
    pub stochastic: bool,
    /// Under the constant-weights promise: the int8 filter rows as the VNNI kernels read them,
    /// kept per filter address.
    pub filters: Option<&'a crate::backend::cpu::weight_cache::WeightCache<i32>>,
    /// Bytes of the filter tensor (what the cache samples).
    pub w_bytes: usize,
}

impl QuantRun<'_> {
    /// The sums go to an Int32 y as they are (α = 1, β = 0, no epilogue).
    pub(super) fn raw_int32(&self) -> bool { self.y_dtype == DataType::Int32 && self.alpha == 1.0 && self.beta == 0.0 && self.epi.is_empty() }
}

/// Element of a patch row: int8 as stored, or f32 decoded from fp8.
trait Lane: Copy + Default + Send + Sync {
    const STEP: usize;
    /// Element `off` of a tensor at `base` whose elements decode with `fmt`.
    unsafe fn load(base: u64, off: usize, fmt: Option<Fp8>) -> Self;
    fn dot4(w: &[Self], p: [&[Self]; 4]) -> [f64; 4];
}

impl Lane for i8 {
    const STEP: usize = INT8_STEP;
    unsafe fn load(base: u64, off: usize, _: Option<Fp8>) -> i8 { *(base as *const i8).add(off) }
    fn dot4(w: &[i8], p: [&[i8]; 4]) -> [f64; 4] { dot4_i8(w, p).map(|v| v as f64) }
}

impl Lane for f32 {
    const STEP: usize = F32_STEP;
    unsafe fn load(base: u64, off: usize, fmt: Option<Fp8>) -> f32 {
        fmt.expect("an fp8 input").decode(*(base as *const u8).add(off))
    }
    fn dot4(w: &[f32], p: [&[f32]; 4]) -> [f64; 4] { dot4_f32(w, p).map(|v| v as f64) }
}

/// y = convert(epilogue(α·conv(x, w) + β·y)).
pub fn forward(g: &Geom, q: Quant, r: &QuantRun) {
    match q {
        Quant::Int8 if vnni::available() => vnni::run(g, r),
        Quant::Int8 => run::<i8>(g, None, None, r),
        Quant::Fp8 { x, w } => run::<f32>(g, Some(x), Some(w), r),
    }
}

fn padded(len: usize, step: usize) -> usize { len.div_ceil(step) * step }

fn run<T: Lane>(g: &Geom, xf: Option<Fp8>, wf: Option<Fp8>, r: &QuantRun) {
    let (cg, kg, taps) = (g.cg(), g.kg(), g.filter_size());
    let len = cg * taps;
    let lp = padded(len, T::STEP);
    // Filter rows [k][c][t], zero-padded to lp.
    let mut wpack = vec![T::default(); g.k * lp];
    for (k, row) in wpack.chunks_exact_mut(lp).enumerate() {
        filter_row(g, r.w, wf, k, row);
    }
    let [od, oh, ow] = g.output;
    let raw = r.raw_int32();
    (0..g.n * od * oh).into_par_iter().for_each(|row| {
        let (n, d, h) = (row / (od * oh), (row / oh) % od, row % oh);
        let mut patches = vec![T::default(); CHUNK.next_multiple_of(4) * lp];
        let mut acc = vec![0f64; CHUNK.next_multiple_of(4)];
        let mut vals = vec![0f32; CHUNK];
        for w0 in (0..ow).step_by(CHUNK) {
            let cnt = CHUNK.min(ow - w0);
            for grp in 0..g.groups {
                for p in 0..cnt {
                    gather::<T>(g, xf, r.x, n, grp, [d, h, w0 + p], &mut patches[p * lp..(p + 1) * lp]);
                }
                for k in grp * kg..(grp + 1) * kg {
                    let wr = &wpack[k * lp..(k + 1) * lp];
                    for p0 in (0..cnt).step_by(4) {
                        let row = |j: usize| &patches[(p0 + j) * lp..(p0 + j + 1) * lp];
                        let s = T::dot4(wr, [row(0), row(1), row(2), row(3)]);
                        acc[p0..p0 + 4].copy_from_slice(&s);
                    }
                    finish(g, r, raw, n, k, (d * oh + h) * ow + w0, &acc[..cnt], &mut vals[..cnt]);
                }
            }
        }
    });
}

/// Filter k's elements in [c][t] order into row[..C/G · taps] (the rest keeps its zeros).
fn filter_row<T: Lane>(g: &Geom, w: u64, fmt: Option<Fp8>, k: usize, row: &mut [T]) {
    let (ws, taps) = (g.w_strides, g.filter_size());
    for c in 0..g.cg() {
        for (t, (td, th, tw)) in tap_iter(g.filter).enumerate() {
            let off = k * ws[0] + c * ws[1] + td * ws[2] + th * ws[3] + tw * ws[4];
            // SAFETY: (k, c, t) is inside w, whose descriptor the problem validated.
            row[c * taps + t] = unsafe { T::load(w, off, fmt) };
        }
    }
}

/// (td, th, tw) of every tap in [t][h][w] order.
fn tap_iter(f: [usize; 3]) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..f[0]).flat_map(move |a| (0..f[1]).flat_map(move |b| (0..f[2]).map(move |c| (a, b, c))))
}

/// The patch of output pixel `o` of image n, group grp: x[n, grp·C/G + c, o·s − p + t·dil],
/// zero outside the input.
fn gather<T: Lane>(g: &Geom, fmt: Option<Fp8>, x: u64, n: usize, grp: usize, o: [usize; 3], out: &mut [T]) {
    let taps = g.filter_size();
    let xs = g.x_strides;
    let pos = |i: usize, t: usize| (o[i] * g.stride[i] + t * g.dilation[i]) as isize - g.pad[i] as isize;
    for (t, (td, th, tw)) in tap_iter(g.filter).enumerate() {
        let (id, ih, iw) = (pos(0, td), pos(1, th), pos(2, tw));
        let inside = [id, ih, iw].iter().zip(g.input).all(|(&p, len)| p >= 0 && (p as usize) < len);
        let base = n * xs[0] + grp * g.cg() * xs[1];
        for c in 0..g.cg() {
            out[c * taps + t] = if inside {
                let off = base + c * xs[1] + id as usize * xs[2] + ih as usize * xs[3] + iw as usize * xs[4];
                // SAFETY: the position is inside x.
                unsafe { T::load(x, off, fmt) }
            } else {
                T::default()
            };
        }
    }
}

/// A product sum as the output conversion takes it: exact i32 sums (VNNI) or f64 ones (the
/// portable path: exact integers for int8, fp8 sums).
pub(super) trait Sum: Copy {
    fn to_f32(self) -> f32;
    /// The raw Int32 output (int8 sums only, which are exact integers).
    fn to_i32(self) -> i32;
}
impl Sum for i32 {
    fn to_f32(self) -> f32 { self as f32 }
    fn to_i32(self) -> i32 { self }
}
impl Sum for f64 {
    fn to_f32(self) -> f32 { self as f32 }
    fn to_i32(self) -> i32 { self as i32 }
}

/// α/β, the epilogue and the conversion of sums `acc` of output pixels sp0 .. sp0 + acc.len()
/// of (n, k) (one image's, consecutive in (d, h, w) order); f32 y whose pixels are evenly
/// spaced (NCHW, NHWC) take the results as one slice or one strided run.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish<A: Sum>(g: &Geom, r: &QuantRun, raw: bool, n: usize, k: usize, sp0: usize, acc: &[A], vals: &mut [f32]) {
    let ys = g.y_strides;
    let [od, oh, ow] = g.output;
    // The step between consecutive pixels where the plane's rows follow each other evenly.
    let step = (ys[3] == ow * ys[4] && (od == 1 || ys[2] == oh * ys[3])).then_some(ys[4]);
    let base = n * ys[0] + k * ys[1];
    let off = |p: usize| {
        let sp = sp0 + p;
        match step {
            Some(s) => base + sp * s,
            None => base + sp / (oh * ow) * ys[2] + (sp / ow) % oh * ys[3] + sp % ow * ys[4],
        }
    };
    if raw {
        for (p, &a) in acc.iter().enumerate() {
            // SAFETY: the element is inside y; tiles of different tasks never overlap.
            unsafe { *(r.y as *mut i32).add(off(p)) = a.to_i32() };
        }
        return;
    }
    for (p, (v, &a)) in vals.iter_mut().zip(acc).enumerate() {
        *v = r.alpha * a.to_f32();
        if r.beta != 0.0 {
            // SAFETY: as above.
            *v += r.beta * unsafe { load_any(r.y_dtype, r.y, off(p)) };
        }
    }
    r.epi.apply_span(vals, n, k, sp0, g.output);
    match (step, r.y_dtype) {
        (Some(1), DataType::Float) => {
            // SAFETY: the run's elements are consecutive in y.
            unsafe { std::slice::from_raw_parts_mut((r.y as *mut f32).add(base + sp0), vals.len()) }.copy_from_slice(vals);
            return;
        }
        (Some(s), DataType::Float) => {
            for (p, &v) in vals.iter().enumerate() {
                // SAFETY: as above.
                unsafe { *(r.y as *mut f32).add(base + (sp0 + p) * s) = v };
            }
            return;
        }
        _ => {}
    }
    let first = ((n * g.k + k) * od * oh * ow + sp0) as u64;
    for (p, &v) in vals.iter().enumerate() {
        // SAFETY: as above.
        unsafe { store_any(r.y_dtype, r.y, off(p), v, r.stochastic, first + p as u64) };
    }
}

/// Element `off` of a y of any output type, as f32.
unsafe fn load_any(dt: DataType, base: u64, off: usize) -> f32 {
    match dt {
        DataType::Int8 => *(base as *const i8).add(off) as f32,
        DataType::Int32 => *(base as *const i32).add(off) as f32,
        DataType::Float8 | DataType::BFloat8 => Fp8::of(dt).expect("fp8").decode(*(base as *const u8).add(off)),
        _ => access::load(dt, base, off),
    }
}

/// Stores `v` into y as `dt` (`quant.rs` conversions); `index` is the element's logical index.
unsafe fn store_any(dt: DataType, base: u64, off: usize, v: f32, stochastic: bool, index: u64) {
    match dt {
        DataType::Int8 => *(base as *mut i8).add(off) = to_i8(v),
        DataType::Int32 => *(base as *mut i32).add(off) = to_i32(v),
        DataType::Float8 | DataType::BFloat8 => {
            let rounding = if stochastic { Rounding::Stochastic(stochastic_bits(index)) } else { Rounding::Nearest };
            *(base as *mut u8).add(off) = Fp8::of(dt).expect("fp8").encode(v, rounding);
        }
        _ => access::store(dt, base, off, v),
    }
}
