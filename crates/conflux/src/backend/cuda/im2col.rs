//! Backward-weights as GEMMs over an explicit im2col of x (kernels/im2col.cu): one row per
//! output pixel of the batch holding its window's taps × channels, and the pass that adds the
//! GEMMs' per-split f32 products into dw.

use super::module::Kernel;
use super::preamble::{self, Extra};
use super::{grid_for, CudaBackend};
use crate::error::{Error, Result};
use crate::problem::Geom;
use crate::types::DataType;

const SOURCE: &str = include_str!("kernels/im2col.cu");
/// Split lanes per output in the sum kernel (`SUM_LANES` there).
const SUM_LANES: u32 = 8;

/// Mirrors `Im2colArgs`.
#[repr(C)]
struct RowsArgs {
    x: u64,
    col: u64,
    pixels: i64,
}

/// Mirrors `SplitSumArgs`.
#[repr(C)]
struct SumArgs {
    partial: u64,
    dw: u64,
    splits: i32,
    alpha: f32,
    beta: f32,
}

/// The im2col matrix of a 2-D, one-group geometry: `rows` pixels of `ld` elements, `cols` of
/// them real (taps × channels, channels fastest; rows start on 16 bytes).
#[derive(Clone, Copy, Debug)]
pub struct Im2colRows {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub elem: usize,
}

impl Im2colRows {
    pub fn of(g: &Geom, dt: DataType) -> Im2colRows {
        let elem = dt.size();
        let cols = g.cg() * g.filter_size();
        Im2colRows { rows: g.n * g.output_size(), cols, ld: cols.next_multiple_of(16 / elem), elem }
    }
    pub fn bytes(&self) -> usize { self.rows * self.ld * self.elem }
}

/// The two kernels of one geometry.
pub struct Im2colKernels {
    rows: Kernel,
    sum: Kernel,
    shape: Im2colRows,
    k: usize,
}

impl Im2colKernels {
    pub fn build(be: &CudaBackend, g: &Geom, dt: DataType) -> Result<Im2colKernels> {
        let shape = Im2colRows::of(g, dt);
        if g.groups != 1 || !g.is_2d() || (shape.elem != 2 && shape.elem != 4) {
            return Err(Error::internal("im2col: one group, 2-D, 2- or 4-byte elements"));
        }
        let mut defs = preamble::conv_geometry_defines(g);
        defs.extend([("COLS", shape.cols), ("LD", shape.ld), ("ELEM_BYTES", shape.elem)].map(|(k, v)| (k.to_string(), v.to_string())));
        let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let src = preamble::source(dt, &[], &Extra { act: None, defines: &defs }, SOURCE)?;
        let module = be.module("im2col", &src)?;
        Ok(Im2colKernels { rows: module.function("im2col_rows")?, sum: module.function("im2col_dw_sum")?, shape, k: g.k })
    }

    pub fn shape(&self) -> Im2colRows { self.shape }

    /// col (`shape().bytes()`, 16-byte aligned) ← the im2col rows of x, on the device's stream.
    pub fn write(&self, be: &CudaBackend, x: u64, col: u64) -> Result<()> {
        if col % 16 != 0 {
            return Err(Error::internal("im2col: destination off 16 bytes"));
        }
        let total = (self.shape.rows * self.shape.ld / (16 / self.shape.elem)) as u64;
        // SAFETY: RowsArgs mirrors the kernel's struct; x spans the geometry's tensor (the
        // caller's validated x; every read is inside its lengths), col holds `bytes()` from a
        // 16-byte aligned address; the grid-stride loop stays below rows · ld.
        unsafe { self.rows.launch(&be.dev, (grid_for(be, total, 256), 1, 1), (256, 1, 1), 0, &RowsArgs { x, col, pixels: self.shape.rows as i64 }) }
    }

    /// dw ← α·Σ of `splits` f32 products (each K rows of `ld`) at `partial` + β·dw, on the
    /// device's stream.
    pub fn sum_into(&self, be: &CudaBackend, partial: u64, splits: usize, dw: u64, alpha: f32, beta: f32) -> Result<()> {
        let outputs = (self.k * self.shape.cols) as u64;
        let args = SumArgs { partial, dw, splits: splits as i32, alpha, beta };
        // SAFETY: SumArgs mirrors the kernel's struct; partial holds `splits` · K · ld f32, dw
        // is the caller's validated filter (the geometry's strides); the grid-stride loop stays
        // below K · cols.
        unsafe { self.sum.launch(&be.dev, (grid_for(be, outputs.div_ceil(32), 1), 1, 1), (32, SUM_LANES, 1), 0, &args) }
    }
}
