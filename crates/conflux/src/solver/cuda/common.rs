//! What every CUDA solver shares: the backend it builds for, the element types the kernels
//! compile for, and the kernel parameters of a convolution run.

use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::params::Params;
use crate::backend::cuda::{preamble, CudaBackend};
use crate::backend::Device;
use crate::error::{Error, Result};
use crate::problem::{FusedKind, FusedProblem, Geom};
use crate::backend::RunContext;
use crate::solver::{Invoker, RunArgs, Solver};
use std::sync::OnceLock;
use crate::types::Direction;
use std::sync::Arc;

/// The CUDA backend a solver builds for (an internal error on a CPU device).
pub(crate) fn cuda_of(device: &Device) -> Result<&Arc<CudaBackend>> {
    crate::backend::cuda_of(device, "CUDA solver")
}

/// Common CUDA applicability: the element types the kernels compile for.
pub(crate) fn check_dtype(problem: &FusedProblem) -> std::result::Result<(), String> {
    preamble::ctype(problem.dtype()).map(|_| ()).map_err(|e| e.reason)
}

/// The geometry of a forward convolution in a type the kernels compile for, else why not
/// (the common refusals of the forward-only CUDA solvers).
pub(crate) fn forward_geometry(problem: &FusedProblem) -> std::result::Result<Geom, String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    check_dtype(problem)?;
    if conv.direction != Direction::Forward {
        return Err(format!("forward only (this is {:?})", conv.direction));
    }
    Ok(Geom::of(conv))
}

/// Kernel parameters of one convolution run: geometry, pointers, α/β and the epilogue's
/// arguments (plan index 1 onwards: op 0 is the convolution).
pub(crate) fn conv_run_params(geom: &Geom, problem: &FusedProblem, a: &RunArgs) -> Result<Params> {
    let FusedKind::Conv { epilogue, .. } = &problem.kind else {
        return Err(Error::internal("convolution invoker given a non-convolution problem"));
    };
    let mut p = Params::conv(geom);
    p.x = a.x.0;
    p.w = a.w.0;
    p.y = a.y.0;
    p.alpha = a.alpha as f32;
    p.beta = a.beta as f32;
    p.epi = preamble::epilogue_args(epilogue, a.ops, 1)?;
    Ok(p)
}

/// The source of a direct convolution kernel: the geometry's defines (`conv_geometry_defines`),
/// then the kernel's own `extra` defines, the epilogue and `template`.
pub(crate) fn direct_kernel_source(problem: &FusedProblem, g: &Geom, extra: &[(&str, usize)], template: &str) -> Result<String> {
    let mut defs: Vec<(String, String)> = preamble::conv_geometry_defines(g);
    defs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    preamble::source(problem.dtype(), problem.epilogue(), &preamble::Extra { act: None, defines: &defs }, template)
}

/// Channels per thread of a direct kernel over `channels` channels of `elem`-byte elements: a
/// whole 16-byte vector where the count allows, else 4, 2 or 1; 1 where channels are not
/// innermost (threads walk columns there).
pub(crate) fn channel_vector(channels: usize, elem: usize, channel_inner: bool) -> usize {
    let lanes = 16 / elem;
    if !channel_inner {
        1
    } else if channels % lanes == 0 {
        lanes
    } else {
        [4, 2, 1].into_iter().find(|v| channels % v == 0).unwrap_or(1)
    }
}

/// Whether a channels-innermost tensor with these strides puts every run of `vec` channels
/// starting at a multiple of `vec` on a `vec`-element boundary (every stride but the channel
/// one a multiple of `vec`).
pub(crate) fn vectors_aligned(strides: &[usize; 5], vec: usize) -> bool {
    strides[1] == 1 && [strides[0], strides[2], strides[3], strides[4]].iter().all(|v| v % vec == 0)
}

/// A direct kernel's tuning label `tw{columns}` or `tw{columns}b{blocks}`: output columns per
/// thread and the blocks per SM its registers are capped for (1 when absent).
pub(crate) fn parse_columns_label(label: &str) -> Option<(usize, usize)> {
    let rest = label.strip_prefix("tw")?;
    match rest.split_once('b') {
        Some((tw, b)) => Some((tw.parse().ok()?, b.parse().ok()?)),
        None => Some((rest.parse().ok()?, 1)),
    }
}

/// The label `parse_columns_label` reads.
pub(crate) fn columns_label(tw: usize, min_blocks: usize) -> String {
    if min_blocks == 1 { format!("tw{tw}") } else { format!("tw{tw}b{min_blocks}") }
}

/// A direct kernel's two entries, each compiled from the same source as its own module:
/// `{name}_vec` (`VECTOR_KERNEL 1`: 8- or 16-byte vector loads and stores, launched only on
/// pointers aligned to them) and `{name}` (element accesses, any alignment). Building compiles
/// the entry the layout's usual call runs (the vector one where the layout has vector accesses
/// at all); the element entry of a vector layout is compiled on the first misaligned call,
/// which most callers never make, since compiling both up front doubles the cold compile.
pub(crate) struct AlignmentVariants {
    be: Arc<CudaBackend>,
    name: &'static str,
    source: String,
    vector: Option<Kernel>,
    element: OnceLock<Result<Kernel>>,
}

impl AlignmentVariants {
    /// Compile the entry of `source` (kernel and module `name`) that calls on a layout with
    /// (`vectors`) or without vector accesses run.
    pub(crate) fn build(be: &Arc<CudaBackend>, name: &'static str, source: String, vectors: bool) -> Result<AlignmentVariants> {
        let mut v = AlignmentVariants { be: be.clone(), name, source, vector: None, element: OnceLock::new() };
        if vectors {
            v.vector = Some(v.compile(true)?);
        } else {
            let k = v.compile(false)?;
            let _ = v.element.set(Ok(k));
        }
        Ok(v)
    }

    /// The kernel for a call whose pointers are `aligned` as the vector entry needs.
    pub(crate) fn kernel(&self, aligned: bool) -> Result<Kernel> {
        match self.vector {
            Some(k) if aligned => Ok(k),
            _ => self.element.get_or_init(|| self.compile(false)).clone(),
        }
    }

    fn compile(&self, vector: bool) -> Result<Kernel> {
        let module = self.be.module(self.name, &variant_source(&self.source, vector))?;
        module.function(&if vector { format!("{}_vec", self.name) } else { self.name.to_string() })
    }
}

/// `source` with the `VECTOR_KERNEL` define that selects one entry of an `AlignmentVariants`
/// kernel.
pub(crate) fn variant_source(source: &str, vector: bool) -> String { format!("#define VECTOR_KERNEL {}\n{source}", vector as u8) }

/// The kernel a fast invoker hands a run to when the caller's pointers do not suit its vector
/// copies or paired stores, built on first need (most callers never pass such pointers).
pub(crate) struct Fallback {
    solver: &'static dyn Solver,
    built: OnceLock<Result<Arc<dyn Invoker>>>,
}

impl Fallback {
    pub(crate) fn new(solver: &'static dyn Solver) -> Fallback { Fallback { solver, built: OnceLock::new() } }

    /// Run `problem` on the fallback kernel.
    pub(crate) fn run(&self, problem: &FusedProblem, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let inv = self.built.get_or_init(|| self.solver.build(problem, ctx.device())).as_ref().map_err(Clone::clone)?;
        inv.run(ctx, a)
    }
}

/// A tensor as a column-major matrix for cuBLASLt: channels × pixels when its channels are
/// contiguous, else pixels × channels; `ld` elements between its columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MatrixView {
    pub channels_contiguous: bool,
    pub ld: usize,
}

/// `strides` ([n, c, d, h, w]) of a tensor of `n` images of `spatial` pixels as one matrix whose
/// pixel index runs over the whole batch, or None when its pixels are not evenly spaced.
pub(crate) fn matrix_view(strides: [usize; 5], n: usize, [d, h, w]: [usize; 3]) -> Option<MatrixView> {
    let s = strides;
    let rows_even = |px: usize| s[3] == w * px && (d == 1 || s[2] == h * s[3]);
    if s[1] == 1 && rows_even(s[4]) && (n == 1 || s[0] == d * h * s[3]) {
        return Some(MatrixView { channels_contiguous: true, ld: s[4] });
    }
    if s[4] == 1 && rows_even(1) && n == 1 {
        return Some(MatrixView { channels_contiguous: false, ld: s[1] });
    }
    None
}
