//! 1×1 forward convolution of f32 NCHW or NHWC tensors on AMX tiles at f32 accuracy
//! (`backend/cpu/conv1x1_amx.rs`: each operand split into three bf16 parts, six part
//! products per multiply, f32 accumulation; `backend/cpu/amx.rs` says what differs from f32
//! FMAs). Stride 1, no padding, any groups, with a none / bias / ReLU / bias + ReLU
//! epilogue, x and y with both their positions or both their channels consecutive. Needs
//! AMX (bf16) and Linux's permission for the tile state; `CONFLUX_CPU_AMX=0` turns it off.
//!
//! W is split per call, or once per filter address under the constant-weights promise
//! (`ConvDesc::weights_constant`). Other α/β go through the generic GEMM convolution, as in
//! `CpuConvGemm1x1`.

use super::common::run_parts;
use super::gemm1x1::{check_common, direct_epilogue, group_problems};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::x86::amx;
use crate::backend::cpu::conv1x1::amx::{self as conv1x1_amx, AmxSplit, SplitW, Walk};
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::weight_cache::WeightCache;
use crate::problem::Geom;
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::ConvAlgorithm;
use std::sync::Arc;

pub struct CpuAmx1x1;

/// Fewest 32-position tiles (N·⌈HW/32⌉), unless W has at least twice as many 32-filter
/// blocks (`conv1x1_amx::shares_x`): with few tiles and few blocks both split operands are
/// read many times and the layer is bound by their bytes (1.5× the f32 bytes). The bound is
/// where AMX stopped beating CpuConvGemm1x1 in interleaved A/Bs
/// (bench/results/2026-11-25-cpu-amx.md; the numbers behind this comment:
/// bench/results/2026-11-27-history-from-status.md, amx1x1.rs).
pub const MIN_TILES: usize = 16;
/// Fewest tiles when W is split on every call (no constant-weights promise): with fewer, the
/// per-call split of W is bound by reading W, nothing overlaps it with the tile multiplies,
/// and CpuConvGemm1x1 is faster — also with the tasks splitting W themselves
/// (`SplitW::PerTask`; bench/results/2026-11-25-cpu-amx.md and 2026-11-25-cpu-session16.md).
pub const MIN_TILES_SPLITTING_W: usize = 4;
/// Fewest multiply-adds per output position (C·K of a group): x is split into bf16 parts
/// once per tile for all filters to share, and with too few filters the split is not paid
/// back. The smallest layer measured, 64-55-55-64 (4096), still gains over CpuConvGemm1x1;
/// smaller ones were not measured (bench/results/2026-11-25-cpu-amx.md).
pub const MIN_MACS_PER_POSITION: usize = 4096;

struct Amx1x1Invoker {
    problem: FusedProblem,
    /// W split by filter address, when the caller promised constant weights (u16 parts
    /// stored two to an f32 slot).
    packed: Option<WeightCache>,
}

impl Solver for CpuAmx1x1 {
    fn name(&self) -> &'static str { "CpuConvAmx1x1" }
    fn solution_id(&self) -> u64 { 9 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        check_common(problem)?;
        let g = Geom::of(problem.conv_problem().ok_or("not a convolution problem")?);
        let positions = |s: [usize; 5], sp: [usize; 3]| s[4] == 1 && (s[3] == sp[2] || sp[1] <= 1) && (s[2] == sp[1] * sp[2] || sp[0] <= 1);
        let nchw = positions(g.x_strides, g.input) && positions(g.y_strides, g.output);
        let nhwc = g.x_strides[1] == 1 && g.y_strides[1] == 1;
        if !nchw && !nhwc {
            return Err("x and y have neither both their positions (NCHW-like) nor both their channels (NHWC-like) consecutive".into());
        }
        // Every 32-position tile reads all of W, split into 1.5× its f32 bytes: with few
        // tiles the layer is bound by W's bytes, and the AVX-512 solver reads fewer.
        let (tiles, fblocks) = (g.n * g.output_size().div_ceil(32), g.kg().div_ceil(32));
        let few_tiles_split = conv1x1_amx::few_tiles_split(tiles, fblocks, g.cg(), !nchw, rayon::current_num_threads());
        if tiles < MIN_TILES && fblocks < 2 * tiles && !few_tiles_split {
            return Err(format!("{tiles} tiles of 32 positions (fewer than {MIN_TILES}) and {fblocks} blocks of 32 filters (fewer than twice that): bound by the split operands' bytes (CpuConvGemm1x1 is faster)"));
        }
        let constant = problem.conv_problem().is_some_and(|c| c.conv.weights_constant());
        if !constant && tiles < MIN_TILES_SPLITTING_W {
            return Err(format!("{tiles} tiles of 32 positions, fewer than {MIN_TILES_SPLITTING_W} to pay for splitting W on every call (no constant-weights promise)"));
        }
        let (cg, kg) = (g.cg(), g.kg());
        if cg * kg < MIN_MACS_PER_POSITION {
            return Err(format!("C·K = {cg}·{kg} per position, under {MIN_MACS_PER_POSITION}: splitting x costs too much of the layer (CpuConvGemm1x1 is faster)"));
        }
        if !device.cpu.amx {
            return Err("needs AMX bf16 tiles (and Linux's permission for them), or CONFLUX_CPU_AMX=0 is set".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~500 GFLOP/s (f32 equivalent) on 2 cores, plus one pass over W.
        let Some(c) = problem.conv_problem() else { return f64::MAX };
        (2.0 * c.macs() / 500e9 + c.w.element_space() as f64 * 8.0 / 20e9) * 1e3 + 0.01
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(Amx1x1Invoker { problem: problem.clone(), packed: WeightCache::if_promised(problem) }))
    }
}

impl Invoker for Amx1x1Invoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, _, r) = run_parts(&self.problem, a, "CpuConvAmx1x1")?;
        let Some((bias, relu)) = direct_epilogue(&g, &r) else { return Ok(()) };
        let problems = group_problems(&g, &r, bias, relu);
        let threads = rayon::current_num_threads();
        // u16 parts per group (whole operand steps, so each group's part stays aligned), and
        // the f32 slots that hold them from a 64-byte boundary on.
        let per_group = conv1x1_amx::packed_len(&problems[0]);
        let slots = (per_group * g.groups + amx::ALIGN_SLACK).div_ceil(2);
        let run = |w: &[f32]| {
            let w = w.as_ptr() as *const u16;
            let w = w.wrapping_add(amx::skip_to_64(w));
            for (group, p) in problems.iter().enumerate() {
                // SAFETY: `check` established NCHW-like x and y and AMX; the descriptors were
                // checked against the buffers by the caller; `w` holds every group's split W.
                unsafe {
                    let wg = std::slice::from_raw_parts(w.add(group * per_group), per_group);
                    conv1x1_amx::forward(p, SplitW::Packed(wg), AmxSplit::choose(p, threads), Walk::choose(p));
                }
            }
        };
        let pack = |dst: &mut [f32]| {
            let dst = dst.as_mut_ptr() as *mut u16;
            let dst = dst.wrapping_add(amx::skip_to_64(dst));
            for (group, p) in problems.iter().enumerate() {
                // SAFETY: `dst` holds `slots` f32, that is every group's parts; W is the filter
                // tensor the descriptors describe; AVX-512 comes with AMX (`amx::available`).
                unsafe { conv1x1_amx::pack_w(p, std::slice::from_raw_parts_mut(dst.add(group * per_group), per_group)) };
            }
        };
        match &self.packed {
            // SAFETY: W is the filter the descriptors describe.
            Some(cache) => run(unsafe { cache.filter(&self.problem, r.ptrs.w, slots, pack) }.as_slice()),
            // Each task splits its own filter blocks where each block has one task.
            None if problems.iter().all(|p| conv1x1_amx::splits_w_per_task(p, AmxSplit::choose(p, threads))) => {
                for p in &problems {
                    // SAFETY: as in `run`; every group's W is the filter the descriptors describe.
                    unsafe { conv1x1_amx::forward(p, SplitW::PerTask, AmxSplit::choose(p, threads), Walk::choose(p)) };
                }
            }
            None => with_scratch(Slot::PackBAll, slots, |w| {
                pack(w);
                run(w);
            }),
        }
        Ok(())
    }
}
