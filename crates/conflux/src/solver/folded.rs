//! 3-D convolutions that are 2-D ones in disguise (`problem::fold_3d`: 1 × R × S filters over
//! the frames of channels-last video, T × 1 × 1 filters over (D, H·W) planes) run as that 2-D
//! problem on the first solver of the same backend that takes it without workspace
//! (`rewritten.rs`). The folded problem addresses the caller's memory unchanged, so the inner
//! invoker runs on the caller's arguments: no copy, and every 2-D fast path (tensor cores,
//! split-K, Winograd, the 1×1 GEMMs) serves video layers. One instance per backend, each in its
//! own list.

use super::rewritten::{Rewrite, Rewritten};
use crate::backend::DeviceKind;
use crate::problem::{fold_3d, FusedProblem};

fn fold(problem: &FusedProblem) -> Result<Rewrite, String> { fold_3d(problem).map(|(problem, _)| Rewrite { problem, w_offset: 0 }) }

pub static CPU_FOLDED_3D: Rewritten = Rewritten { kind: DeviceKind::Cpu, name: "CpuConvFolded3d", id: 22, estimate_like: &super::cpu::CpuImplicitGemm, rewrite: fold };
pub static CUDA_FOLDED_3D: Rewritten = Rewritten { kind: DeviceKind::Cuda, name: "CudaConvFolded3d", id: 127, estimate_like: &super::cuda::CudaConvIgemmTma, rewrite: fold };
