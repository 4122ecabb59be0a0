//! Forward convolutions whose outer filter taps reach no output (`problem::trim_dead_taps`:
//! atrous layers whose dilation exceeds the map, DeepLab's dilation-36 3×3 on 28×28 being a
//! 1×1 in effect) run with those taps cut off, on the first solver of the same backend that
//! takes the smaller problem without workspace (`rewritten.rs`). The filter is a view of the
//! caller's w at an offset, so nothing is copied; the dense kernels would multiply the padding's
//! zeros for every cut tap. The CPU list has its own per-tap solver (`CpuLiveTaps`), which also
//! covers taps that reach part of the output.

use super::rewritten::{Rewrite, Rewritten};
use crate::backend::DeviceKind;
use crate::problem::{trim_dead_taps, FusedKind, FusedProblem};

fn trim(problem: &FusedProblem) -> Result<Rewrite, String> {
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution with an epilogue".into()) };
    let (conv, w_offset) = trim_dead_taps(conv)?.ok_or("no filter taps that reach no output at both ends of an axis")?;
    Ok(Rewrite { problem: FusedProblem { kind: FusedKind::Conv { conv, epilogue: epilogue.clone() } }, w_offset })
}

pub static CUDA_TRIMMED_TAPS: Rewritten = Rewritten { kind: DeviceKind::Cuda, name: "CudaConvTrimmedTaps", id: 130, estimate_like: &super::cuda::CudaConvIgemmTma, rewrite: trim };
