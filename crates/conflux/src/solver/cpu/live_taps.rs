//! Forward f32 convolutions whose taps lie in the zero padding for much of their output
//! (atrous layers on small maps, 3×3 filters on 1×1 / 2×2 maps) as a sum over the taps of 1×1
//! convolutions, each over the outputs its tap reaches (`problem::live_taps`: views of x, w
//! and y, no copies), each on the first solver of the list that takes it without workspace.
//! Dense solvers multiply the padding's zeros: DeepLab's 3×3 of dilation 36 on 28×28 reads
//! one tap in nine, and at dilation 24 the eight outer taps reach a sixth of the outputs.
//!
//! The live taps' weights are gathered into dense K × C/G matrices first (once per filter
//! address under the constant-weights promise, else per call), so every tap reads a dense 1×1
//! filter. A tap reaching every output runs first with the caller's α and β (so α = 1, β = 0
//! takes the 1×1 solvers' fast path); each other tap writes α·its products to a packed buffer
//! (β = 0, the fast path again), added to the outputs it reaches; the epilogue then runs over y
//! in place: y = epilogue(α·Σ taps + β·y) as the API
//! defines. When that tap is the only one, it runs alone with the fused epilogue. A tap
//! reaching every output is required.

use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::weight_cache::{transformed_filter, WeightCache};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::{live_taps, ConvProblem, EpiOp, FusedKind, FusedProblem, Geom, TapPart};
use crate::tensor::TensorDesc;
use crate::solver::registry;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{BnMode, ConvAlgorithm, DataType};
use rayon::prelude::*;
use std::sync::Arc;

/// Largest share of the dense products the taps may compute: above it the skipped zeros do not
/// pay for running one convolution per tap (DeepLab's rate 12 on 28×28 computes 51%; a 3×3 of
/// padding 1 on a 3×3 map 60%, on 7×7 82%).
const MAX_WORK_FRACTION: f64 = 0.6;

/// Most live taps (a 7×7 filter has 49): each is a convolution of its own.
const MAX_TAPS: usize = 64;
/// Fewest input and output channels per group.
const MIN_CHANNELS: usize = 16;

pub struct CpuLiveTaps;

/// The taps' problems (the one reaching every output first; the epilogue fused only when it is
/// the only tap), or why not.
fn plan(problem: &FusedProblem) -> std::result::Result<Vec<(TapPart, FusedProblem)>, String> {
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution problem".into()) };
    if conv.dtype() != DataType::Float {
        // y holds the partial sums between taps: in 16 bits each would be rounded.
        return Err(format!("f32 only (this is {:?})", conv.dtype()));
    }
    // Per-activation BN parameters and residual tensors have the output's shape; the epilogue
    // pass over y applies bias, spatial BN and activations.
    if epilogue.iter().any(|op| matches!(op, EpiOp::AddTensor { .. } | EpiOp::BnInference { mode: BnMode::PerActivation, .. })) {
        return Err("an epilogue op reads a tensor of the output's shape".into());
    }
    // Each tap becomes a 1×1 product, a GEMM only with enough channels per group: depthwise
    // and small-group layers run direct kernels that skip the padding themselves.
    let (cg, kg) = (conv.w.lens()[1], conv.k() / conv.groups());
    if cg < MIN_CHANNELS || kg < MIN_CHANNELS {
        return Err(format!("{cg} input and {kg} output channels per group (at least {MIN_CHANNELS} each: the per-tap products are GEMMs)"));
    }
    let (mut parts, fraction) = live_taps(conv)?;
    if fraction > MAX_WORK_FRACTION {
        return Err(format!("the taps reach inside the input for {:.0}% of the dense products (at most {:.0}%)", fraction * 100.0, MAX_WORK_FRACTION * 100.0));
    }
    if parts.len() > MAX_TAPS {
        return Err(format!("{} live taps (at most {MAX_TAPS}: one convolution each)", parts.len()));
    }
    let whole = parts.iter().position(|p| p.whole).ok_or("no tap reaches every output")?;
    let first = parts.remove(whole);
    parts.insert(0, first);
    // Each tap's filter becomes the dense K × C/G matrix `gather_taps` makes, in run order.
    let dense = TensorDesc::new(DataType::Float, &[conv.k(), conv.w.lens()[1], 1, 1]).map_err(|e| e.reason)?;
    let n = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, mut p)| {
            let epi = if n == 1 { epilogue.clone() } else { Vec::new() };
            // The other taps write their products to a packed buffer (α, β = 0: the 1×1 solvers'
            // fast path), which the invoker then adds to y.
            let y = if i == 0 { p.problem.y.clone() } else { TensorDesc::new(DataType::Float, p.problem.y.lens()).map_err(|e| e.reason)? };
            p.problem = ConvProblem::forward(&p.problem.conv, &p.problem.x, &dense, &y).map_err(|e| e.reason)?;
            p.w_offset = i * dense.element_count();
            let fp = FusedProblem { kind: FusedKind::Conv { conv: p.problem.clone(), epilogue: epi } };
            Ok((p, fp))
        })
        .collect()
}

/// dst ← the filters of `taps` (in order) as dense K × C/G matrices, one after another.
///
/// # Safety
/// `w` addresses the f32 filter tensor `g` describes; `dst` holds taps · K · C/G values.
unsafe fn gather_taps(g: &Geom, w: *const f32, taps: &[[usize; 2]], dst: &mut [f32]) {
    let (k, cg, ws) = (g.k, g.cg(), g.w_strides);
    let wa = w as usize;
    dst.par_chunks_mut(cg).enumerate().for_each(|(i, row)| {
        let (t, kk) = (i / k, i % k);
        let [r, s] = taps[t];
        let first = (wa as *const f32).wrapping_add(kk * ws[0] + r * ws[3] + s * ws[4]);
        for (c, v) in row.iter_mut().enumerate() {
            // SAFETY: element (kk, c, r, s) of the filter.
            *v = unsafe { *first.add(c * ws[1]) };
        }
    });
}

impl Solver for CpuLiveTaps {
    fn name(&self) -> &'static str { "CpuConvLiveTaps" }
    fn solution_id(&self) -> u64 { 19 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> { plan(problem).map(|_| ()) }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The live products at about 150 GFLOP/s, plus a small cost per tap.
        match (problem.conv_problem(), problem.conv_problem().and_then(|c| live_taps(c).ok())) {
            (Some(c), Some((parts, fraction))) => 2.0 * c.macs() * fraction / 150e9 * 1e3 + 0.005 * parts.len() as f64,
            _ => f64::MAX,
        }
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let parts = plan(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let info = ctx.device().info();
        let mut runs = Vec::with_capacity(parts.len());
        for (part, fp) in parts {
            let inner = registry::walk(&fp, info, |e| e.solver.name() != self.name())
                .find(|s| s.verdict.is_ok() && s.solver.workspace_bytes(&fp) == 0)
                .ok_or_else(|| Error::not_implemented(format!("{}: no solver takes tap {:?}", self.name(), part.tap)))?;
            runs.push((part, inner.solver.build(&fp, ctx)?));
        }
        let g = problem.conv_problem().map(Geom::of).ok_or_else(|| Error::internal("live taps: not a convolution"))?;
        Ok(Arc::new(LiveTapsInvoker { runs, geom: g, problem: problem.clone(), packed: WeightCache::if_promised(problem) }))
    }
}

struct LiveTapsInvoker {
    /// The taps in run order: the one reaching every output, then the others.
    runs: Vec<(TapPart, Arc<dyn Invoker>)>,
    geom: Geom,
    problem: FusedProblem,
    /// The gathered tap filters by filter address, when the caller promised constant weights.
    packed: Option<WeightCache>,
}

impl Invoker for LiveTapsInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let taps: Vec<[usize; 2]> = self.runs.iter().map(|(p, _)| p.tap).collect();
        let len = taps.len() * self.geom.k * self.geom.cg();
        // SAFETY: w is the caller's f32 filter, validated against the problem.
        let dense = unsafe { transformed_filter(self.packed.as_ref(), &self.problem, a.w.0, len, |d| gather_taps(&self.geom, a.w.0 as *const f32, &taps, d)) };
        let w = DevPtr(dense.as_slice().as_ptr() as u64);
        let at = |p: DevPtr, offset: usize| DevPtr(p.0 + offset as u64 * 4);
        let Some(((whole, whole_inv), partial)) = self.runs.split_first() else { return Ok(()) };
        if partial.is_empty() {
            return whole_inv.run(ctx, &RunArgs { x: at(a.x, whole.x_offset), w: at(w, whole.w_offset), y: at(a.y, whole.y_offset), ..*a });
        }
        whole_inv.run(ctx, &RunArgs { x: at(a.x, whole.x_offset), w: at(w, whole.w_offset), y: at(a.y, whole.y_offset), ops: &[], ..*a })?;
        let (conv, epilogue) = match &self.problem.kind {
            FusedKind::Conv { conv, epilogue } => (conv, epilogue),
            _ => return Err(Error::internal("live taps: not a convolution")),
        };
        let most = partial.iter().map(|(p, _)| p.problem.y.element_count()).max().unwrap_or(0);
        let mut products = vec![0f32; most];
        let add = CpuEpilogue::new(&[], &[], &conv.y, 1)?;
        for (p, inv) in partial {
            let t = DevPtr(products.as_mut_ptr() as u64);
            inv.run(ctx, &RunArgs { x: at(a.x, p.x_offset), w: at(w, p.w_offset), y: t, beta: 0.0, ops: &[], ..*a })?;
            // SAFETY: the tap's outputs are a view of the caller's f32 y at y_offset.
            unsafe { store_planes(&self.geom, at(a.y, p.y_offset).0, p.problem.y.lens(), 1.0, &add, |i, v| v.copy_from_slice(&products[i * v.len()..][..v.len()])) };
        }
        if epilogue.is_empty() {
            return Ok(());
        }
        let epi = CpuEpilogue::new(epilogue, a.ops, &conv.y, 1)?;
        let (ys, y0) = (self.geom.y_strides, a.y.0 as usize);
        let sp_off = spatial_offsets(self.geom.output, ys);
        // SAFETY: y is the caller's f32 output; each plane is read, then rewritten through the epilogue.
        unsafe {
            store_planes(&self.geom, a.y.0, conv.y.lens(), 0.0, &epi, |i, v| {
                let plane = (y0 as *const f32).add((i / self.geom.k) * ys[0] + (i % self.geom.k) * ys[1]);
                v.iter_mut().zip(&sp_off).for_each(|(x, &o)| *x = *plane.add(o));
            })
        };
        Ok(())
    }
}

/// For every (n, k) plane of the f32 view of y at `y` with lengths `lens` (the caller's
/// strides): `fill(plane index, values)` gives its values, then the shared convolution store
/// writes epi(values + β·y) there (`OutTensor`: β = 1 adds a tap's products, β = 0 with the
/// plan's epilogue finishes y).
///
/// # Safety
/// `y` addresses that view inside the f32 output tensor `g` describes.
unsafe fn store_planes(g: &Geom, y: u64, lens: &[usize], beta: f32, epi: &CpuEpilogue, fill: impl Fn(usize, &mut [f32]) + Sync) {
    let dims = [1, lens[2], lens[3]];
    let sp_off = spatial_offsets(dims, g.y_strides);
    let out = OutTensor { ptr: y, dt: DataType::Float, strides: g.y_strides, dims, sp_off: &sp_off, alpha: 1.0, beta, epi };
    (0..lens[0] * lens[1]).into_par_iter().for_each(|i| {
        let mut v = vec![0f32; lens[2] * lens[3]];
        fill(i, &mut v);
        // SAFETY: plane (n, k) of the view, written by this task only.
        unsafe { out.write_span(&mut v, i / lens[1], i % lens[1], 0) };
    });
}

