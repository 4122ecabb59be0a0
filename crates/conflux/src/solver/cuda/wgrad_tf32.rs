//! The f32 side of the tensor-core backward-weights solver (CudaConvBwdWeightsTma, 109):
//! TF32 products when the descriptor allows TF32, split TF32 products ("3xTF32", f32
//! accuracy) when it asks for strict f32 (kernels/conv_wgrad_tf32.cu). TF32 wgmma reads B only
//! pixel-contiguous, so one operand ("T": dy, or x for a plain 1×1 GEMM with fewer input than
//! output channels) is first transposed into scratch, split into hi and lo parts when strict;
//! the other ("R") is loaded as it is and read through registers.

use super::tensor_core::TcPrecision;
use super::igemm_tma::{im2col_boxes, plain_gemm};
use super::wgrad_tma::WgradTile;
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::tensor_map::{self, TensorMap};
use crate::backend::cuda::CudaBackend;
use crate::problem::Geom;
use crate::error::{Error, Result};
use crate::types::DataType;

/// The tuning space for f32 (every entry fits 227 KiB with split stages: [R | T hi | T lo]).
pub const TF32_CONFIGS: &[WgradTile] = &[
    WgradTile::new(128, 128, 4),
    WgradTile::new(128, 64, 6),
    WgradTile::new(64, 128, 5),
    WgradTile::new(64, 64, 8),
    WgradTile::new(128, 128, 3),
];

/// Heuristic: 64 R (and T) channels per block when a group has at most 64 (no half-empty
/// warpgroup or wgmma), else 128.
pub fn tf32_heuristic(g: &Geom) -> WgradTile {
    let (r, t) = if r_is_x(g) { (g.filter_size() * g.cg(), g.kg()) } else { (g.kg(), g.cg()) };
    match (r <= 64, t <= 64) {
        (true, true) => WgradTile::new(64, 64, 8),
        (true, false) => WgradTile::new(64, 128, 5),
        (false, true) => WgradTile::new(128, 64, 6),
        (false, false) => WgradTile::new(128, 128, 4),
    }
}

/// Shared memory of a tile: stages of [BM R rows | BN T rows (and BN lo rows)] of 128 bytes,
/// two barriers per stage, 1 KiB to align the base for the swizzle.
pub fn smem_bytes(t: &WgradTile, prec: TcPrecision) -> usize { t.stages * (t.bm + prec.b_tiles() * t.bn) * 128 + 16 * t.stages + 1024 }

/// Whether R is x (the transposed operand dy): always but for a plain 1×1 GEMM whose x has
/// fewer channels than dy, where x is the smaller tensor to transpose — if dy can be loaded as
/// boxes (channels-last, evenly spaced 16-byte aligned pixel rows); else dy is transposed from
/// its own layout, which saves the layout adapter a copy of it.
pub fn r_is_x(g: &Geom) -> bool { !(plain_gemm(g) && g.c < g.k && dy_as_boxes(g, 4)) }

/// dy is a matrix of pixel rows the copy engine can load as boxes (elements of a 16-byte chunk).
pub fn dy_as_boxes(g: &Geom, chunk: usize) -> bool {
    let (ys, [od, oh, ow]) = (g.y_strides, g.output);
    // (A 2-D dy has D stride 0: only the N stride says whether images are packed.)
    ys[1] == 1 && ys[4] % chunk == 0 && ys[3] == ow * ys[4] && (od == 1 || ys[2] == oh * ys[3]) && ys[0] == od * oh * ys[3]
}

/// The transposed operand: channel rows (all groups) × pixel columns, rows `ld` elements
/// apart (16-byte aligned), lo rows below the hi rows when split.
#[derive(Clone, Copy, Debug)]
pub struct TLayout {
    pub rows: usize,
    pub pixels: usize,
    pub ld: usize,
    pub parts: usize,
}

impl TLayout {
    pub fn of(g: &Geom, prec: TcPrecision) -> TLayout {
        let pixels = g.n * g.output_size();
        TLayout { rows: if r_is_x(g) { g.k } else { g.c }, pixels, ld: pixels.next_multiple_of(4), parts: prec.b_tiles() }
    }
    pub fn bytes(&self) -> usize { self.parts * self.rows * self.ld * 4 }
}

/// The kernel's defines beyond the tensor-core ones: tile, operand roles, slot shape.
pub fn defines(g: &Geom, cfg: &WgradTile, prec: TcPrecision) -> Vec<(&'static str, usize)> {
    let rx = r_is_x(g);
    let (tile_k, tile_cols) = if rx { (cfg.bn, cfg.bm) } else { (cfg.bm, cfg.bn) };
    vec![
        ("BM", cfg.bm), ("BN", cfg.bn), ("BK", 32), ("STAGES", cfg.stages), ("THREADS", cfg.threads()), ("LOADER_THREADS", 128),
        ("A_TILED", plain_gemm(g) as usize), ("R_IS_X", rx as usize), ("F32_SPLIT", (prec == TcPrecision::Tf32x3) as usize),
        ("TILE_K", tile_k), ("TILE_COLS", tile_cols),
    ]
}

/// R's map (x: im2col boxes of 32 pixels × 32 channels, or boxes of the pixel matrix; dy:
/// boxes of its pixel matrix) and T's (32 pixels × BN rows of the scratch at `t`).
pub fn encode_maps(g: &Geom, cfg: &WgradTile, t_layout: &TLayout, x: u64, dy: u64, t: u64) -> Result<(TensorMap, TensorMap)> {
    let dt = DataType::Float;
    let pixels = (g.n * g.output_size()) as u64;
    let r = if !r_is_x(g) {
        tensor_map::tiled_2d([g.k as u64, pixels], g.y_strides[4] as u64 * 4, [32, 32], dt, dy)?
    } else if plain_gemm(g) {
        tensor_map::tiled_2d([g.c as u64, (g.n * g.input_size()) as u64], g.x_strides[4] as u64 * 4, [32, 32], dt, x)?
    } else {
        tensor_map::im2col(&im2col_boxes(g, dt, 32, 32), dt, x)?
    };
    let rows = (t_layout.parts * t_layout.rows) as u64;
    let tm = tensor_map::tiled_2d([pixels, rows], t_layout.ld as u64 * 4, [32, cfg.bn as u32], dt, t)?;
    Ok((r, tm))
}

/// Mirrors `TransposeArgs` in conv_wgrad_tf32.cu.
#[repr(C)]
struct TransposeArgs {
    src: u64,
    dst: u64,
    ld: i64,
    rows: i32,
    pixels: i32,
}

/// Copies T (dy, or x when R is dy) from the caller's tensor `src` into the scratch at `dst`.
pub fn transpose(be: &CudaBackend, kernel: &Kernel, l: &TLayout, src: u64, dst: u64) -> Result<()> {
    if l.rows > i32::MAX as usize || l.pixels > i32::MAX as usize || l.rows.div_ceil(32) > 65535 {
        return Err(Error::not_implemented(format!("wgrad-tf32: {} channels × {} pixels exceed the transpose's grid", l.rows, l.pixels)));
    }
    let args = TransposeArgs { src, dst, ld: l.ld as i64, rows: l.rows as i32, pixels: l.pixels as i32 };
    let grid = (l.pixels.div_ceil(32) as u32, l.rows.div_ceil(32) as u32, 1);
    // SAFETY: TransposeArgs mirrors the kernel's struct; src is the caller's validated tensor
    // (read through the problem's compiled strides), dst holds l.bytes(); the kernel stays
    // inside rows × pixels.
    unsafe { kernel.launch(&be.dev, grid, (256, 1, 1), 0, &args) }
}
