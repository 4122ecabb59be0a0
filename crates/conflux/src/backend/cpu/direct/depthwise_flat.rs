//! f32 depthwise forward on channels-first planes with AVX-512 (kernel in
//! `x86/depthwise_flat.rs`) at stride 1 or 2: the output plane is computed as one flat run of
//! 16-output vectors, each tap a masked load where its input lies. At stride 1 (outputs as wide
//! as the input) the kernel reads the input plane in place; at stride 2 each task first splits
//! its input plane into the stride phases, whose rows are as wide as the output's. Nothing is
//! padded or transposed, on 7 × 7 planes as on 112 × 112 ones; y planes are stored from
//! registers with bias and ReLU / ReLU6, or through the general store.

use crate::backend::cpu::direct::depthwise_planes::{f32_filters, MAX_PHASE_FLOATS};
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::pointwise::epilogue::{CpuEpilogue, FusedStore};
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::x86::depthwise_flat::{self as k, PlaneTaps, LANES};
use crate::problem::Geom;
use rayon::prelude::*;

/// Mask entries (taps × output vectors of one plane) at most: 2 MB of masks.
pub const MAX_MASKS: usize = 1 << 20;

/// Whether this CPU runs the kernel (AVX-512F and FMA).
pub fn available() -> bool { crate::backend::cpu::lanes::level() >= 2 }

/// Filters of more taps go to the 16-channel block solver: the flat kernel's per-tap masks and
/// the lanes it leaves empty on short rows make it slower there
/// (bench/results/2026-11-29-cpu-depthwise-flat.md).
pub const MAX_TAPS: usize = 9;

/// Least share of its vectors' lanes a plane's outputs must fill (7 × 7 planes fill 49 of 64 and
/// ran slower than on the block solver; 14 × 14 fill 196 of 208 and ran as fast or faster:
/// bench/results/2026-11-29-cpu-depthwise-flat.md).
const MIN_LANE_USE: [usize; 2] = [7, 8];

/// Output vectors per band at stride 2: a band's input rows are split into phases just before
/// its outputs read them, while they are in L1 (a whole 112 × 112 plane's phases are not).
const BAND_VECTORS: usize = 32;

/// Why a depthwise geometry is not for the flat kernel, or None when it is.
pub fn unsuitable(g: &Geom) -> Option<String> {
    if let Some(why) = planes_unsuitable(g) {
        return Some(why);
    }
    if g.filter_size() > MAX_TAPS {
        return Some(format!("filters of at most {MAX_TAPS} taps ({}×{} given: CpuConvDepthwiseBlocks is faster there)", g.filter[1], g.filter[2]));
    }
    let outputs = g.output[1] * g.output[2];
    if outputs * MIN_LANE_USE[1] < outputs.div_ceil(LANES) * LANES * MIN_LANE_USE[0] {
        return Some(format!("planes of {}×{} outputs fill {outputs} of {} lanes (under {}/{}: CpuConvDepthwiseBlocks fills every lane with channels)", g.output[1], g.output[2], outputs.div_ceil(LANES) * LANES, MIN_LANE_USE[0], MIN_LANE_USE[1]));
    }
    if (g.stride[1] > 1 || g.stride[2] > 1) && g.output[2] < LANES {
        return Some(format!("strided with output rows of at least {LANES} ({} given: splitting narrower rows into phases costs more than their taps; CpuConvDepthwiseBlocks stages them)", g.output[2]));
    }
    None
}

/// Why the planes of a geometry cannot be read as flat runs (`FlatPlan`), or None: strides 1
/// and 2, output rows as wide as the input's stride phase, dense input planes.
pub fn planes_unsuitable(g: &Geom) -> Option<String> {
    let (sh, sw) = (g.stride[1], g.stride[2]);
    if sh > 2 || sw > 2 {
        return Some(format!("strides 1 and 2 only ({sh}×{sw} given)"));
    }
    if g.output[2] != g.input[2].div_ceil(sw) {
        return Some(format!("outputs as wide as the input's stride phases only ({} columns in, stride {sw}, {} out)", g.input[2], g.output[2]));
    }
    if g.x_strides[4] != 1 || g.x_strides[3] != g.input[2] {
        return Some(format!("dense input planes only (x strides {:?})", g.x_strides));
    }
    None
}

/// The taps of one plane, built once per problem.
#[derive(Clone, Debug)]
pub struct FlatPlan {
    /// Stride phases (rows, columns): [1, 1] reads x in place.
    pub(crate) phases: [usize; 2],
    /// Columns of a phase row (the output's width) and floats of one phase.
    pub(crate) pitch: usize,
    pub(crate) phase_len: usize,
    /// Input rows from an output row's first (times the stride) to the first its filter reads
    /// (negative above), past it to the last it reads (+ 1), and the image's rows.
    top: isize,
    reach: usize,
    in_rows: usize,
    offsets: Vec<isize>,
    masks: Vec<u16>,
    pub(crate) vectors: usize,
    pub(crate) outputs: usize,
}

impl FlatPlan {
    /// None where the masks would exceed `MAX_MASKS`, the phases `MAX_PHASE_FLOATS`, or a size
    /// overflows; `g` is `unsuitable`'s None.
    pub fn of(g: &Geom) -> Option<FlatPlan> {
        let ([_, h, w], [_, ho, wo], [_, fh, fw]) = (g.input, g.output, g.filter);
        let [sh, sw] = [g.stride[1], g.stride[2]];
        let outputs = ho.checked_mul(wo)?;
        let vectors = outputs.div_ceil(LANES);
        let taps = fh.checked_mul(fw)?;
        if outputs == 0 || taps.checked_mul(vectors)? > MAX_MASKS {
            return None;
        }
        // Phase (a, b) row i, column j holds input (i·sh + a, j·sw + b); rows of `wo` columns.
        let (pitch, phase_len) = (wo, h.div_ceil(sh).checked_mul(wo)?);
        if phase_len.checked_mul(sh * sw)? > MAX_PHASE_FLOATS {
            return None;
        }
        let (ph, pw) = (g.pad[1] as isize, g.pad[2] as isize);
        let inside = |i: isize, n: usize| i >= 0 && (i as usize) < n;
        let row_shift = |r: usize| Some(isize::try_from(r.checked_mul(g.dilation[1])?).ok()? - ph);
        let col_shift = |s: usize| Some(isize::try_from(s.checked_mul(g.dilation[2])?).ok()? - pw);
        let mut offsets = Vec::with_capacity(taps);
        let mut masks = vec![0u16; taps * vectors];
        for r in 0..fh {
            let dr = row_shift(r)?;
            for s in 0..fw {
                let ds = col_shift(s)?;
                let t = offsets.len();
                let (sh_, sw_) = (sh as isize, sw as isize);
                let phase = dr.rem_euclid(sh_) * sw_ + ds.rem_euclid(sw_);
                let at = phase.checked_mul(phase_len as isize)?.checked_add(dr.div_euclid(sh_).checked_mul(pitch as isize)?)?;
                offsets.push(at.checked_add(ds.div_euclid(sw_))?);
                for p in 0..outputs {
                    if inside(((p / wo) * sh) as isize + dr, h) && inside(((p % wo) * sw) as isize + ds, w) {
                        masks[t * vectors + p / LANES] |= 1 << (p % LANES);
                    }
                }
            }
        }
        let (top, bottom) = (row_shift(0)?, row_shift(fh - 1)?);
        let reach = usize::try_from(bottom + 1).unwrap_or(0);
        Some(FlatPlan { phases: [sh, sw], pitch, phase_len, top, reach, in_rows: h, offsets, masks, vectors, outputs })
    }

    /// Input rows [0, n) that output vectors [0, end) read (the rows to split before them).
    fn rows_read(&self, end: usize) -> usize {
        let last_row = ((end * LANES).min(self.outputs) - 1) / self.pitch;
        (last_row * self.phases[0] + self.reach).min(self.in_rows)
    }

    /// The input rows that output vectors `vs` read.
    pub(crate) fn rows_of(&self, vs: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let first_row = (vs.start * LANES / self.pitch * self.phases[0]) as isize + self.top;
        (first_row.max(0) as usize).min(self.in_rows)..self.rows_read(vs.end)
    }

    pub(crate) fn taps(&self) -> PlaneTaps<'_> {
        PlaneTaps { offsets: &self.offsets, masks: &self.masks, vectors: self.vectors, outputs: self.outputs }
    }
}

/// How the flat drivers store: bias and ReLU / ReLU6 from the kernel's registers into packed f32
/// y planes (the fused store, when α = 1 and β = 0), else raw sums through the general store,
/// which needs every output position's offset.
pub(crate) fn stores<'a>(g: &Geom, alpha: f32, beta: f32, epi: &'a CpuEpilogue) -> (Option<FusedStore<'a>>, Vec<usize>) {
    let packed = g.y_strides[4] == 1 && g.y_strides[3] == g.output[2];
    let direct = (alpha == 1.0 && beta == 0.0 && packed).then(|| epi.fused_store()).flatten();
    let sp_off = if direct.is_some() { Vec::new() } else { spatial_offsets(g.output, g.y_strides) };
    (direct, sp_off)
}

/// y = epilogue(α·conv(x, w) + β·y) for a 2-D f32 depthwise convolution (one input channel per
/// group, any channel multiplier) that `unsuitable` accepts.
///
/// # Safety
/// The CPU has AVX-512F; the pointers hold the tensors `g` describes; `plan` is `g`'s.
pub unsafe fn forward(g: &Geom, plan: &FlatPlan, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let (kg, taps, outputs) = (g.kg(), plan.offsets.len(), plan.outputs);
    let (xs, ys) = (g.x_strides, g.y_strides);
    let wts = f32_filters(g, p);
    let (direct, sp_off) = stores(g, alpha, beta, epi);
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: ys, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    let pt = plan.taps();
    // Tasks of at least ~64 K multiply-adds: rayon's per-task cost is paid per plane otherwise.
    let planes = g.n * g.c;
    let work = (plan.vectors * LANES * taps * kg).max(1);
    let chunk = (65536 / work).clamp(1, planes.div_ceil(2 * rayon::current_num_threads()).max(1));
    let (xp, yp) = (p.x as usize, p.y as usize);
    let in_place = plan.phases == [1, 1];
    let phases_len = if in_place { 0 } else { plan.phase_len * plan.phases[0] * plan.phases[1] };
    (0..planes.div_ceil(chunk)).into_par_iter().for_each(|t| {
        let dense_len = if direct.is_some() { 0 } else { outputs * kg };
        with_scratch(Slot::Task, dense_len + phases_len, |buf| {
            let (dense, phases) = buf.split_at_mut(dense_len);
            for nc in t * chunk..((t + 1) * chunk).min(planes) {
                let (n, c) = (nc / g.c, nc % g.c);
                let x = (xp as *const f32).add(n * xs[0] + c * xs[1]);
                let src = if in_place { x } else { phases.as_ptr() };
                // Bands of output vectors, each after the input rows it reads are split.
                let band = if in_place { plan.vectors } else { BAND_VECTORS };
                let mut split = 0;
                for v0 in (0..plan.vectors).step_by(band) {
                    let vs = v0..(v0 + band).min(plan.vectors);
                    if !in_place {
                        let need = plan.rows_read(vs.end);
                        k::split_phases(x, split..need, g.input[2], plan.phases[0], plan.phases[1], phases.as_mut_ptr(), plan.pitch, plan.phase_len);
                        split = split.max(need);
                    }
                    for ko in c * kg..(c + 1) * kg {
                        let w = wts[ko * taps..][..taps].as_ptr();
                        match &direct {
                            Some(fs) => k::plane(&pt, vs.clone(), src, w, (yp as *mut f32).add(n * ys[0] + ko * ys[1]), fs.bias_of(ko), fs.clamp.on, fs.clamp.hi),
                            None => k::plane(&pt, vs.clone(), src, w, dense.as_mut_ptr().add(ko % kg * outputs), 0.0, false, 0.0),
                        }
                    }
                }
                for ko in c * kg..(c + 1) * kg {
                    match &direct {
                        // SAFETY: this task owns y plane (n, ko), Ho·Wo packed f32 elements.
                        Some(fs) => fs.finish(std::slice::from_raw_parts_mut((yp as *mut f32).add(n * ys[0] + ko * ys[1]), outputs)),
                        // SAFETY: this task owns y plane (n, ko).
                        None => out.write_span(&mut dense[ko % kg * outputs..][..outputs], n, ko, 0),
                    }
                }
            }
        });
    });
}
