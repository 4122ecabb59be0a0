//! Gathers the sub-filter of a backward-data phase (kernels/sub_filter.cu) for kernels that
//! read a forward filter of any channel count (the few-channels kernel): packed C × taps × KG,
//! taps chosen and reversed by the phase's tap map.

use super::{grid_for, CudaBackend};
use crate::error::{Error, Result};
use crate::problem::{shape5, TapMap};
use crate::tensor::TensorDesc;

const SOURCE: &str = include_str!("kernels/sub_filter.cu");

/// Mirrors `SubFilterArgs`.
#[repr(C)]
struct Args {
    src: u64,
    dst: u64,
    s_k: i64,
    s_c: i64,
    s_tap: [i64; 3],
    first: [i32; 3],
    step: [i32; 3],
    count: [i32; 3],
    kg: i32,
    cg: i32,
    elem: i32,
    total: i64,
}

/// The gather of one phase's sub-filter out of w.
#[derive(Clone, Debug)]
pub struct SubFilter {
    strides: [usize; 5],
    taps: TapMap,
    kg: usize,
    cg: usize,
    groups: usize,
    elem: usize,
}

impl SubFilter {
    /// w (K × CG × taps) in `groups` groups, the taps `taps` of it.
    pub fn new(w: &TensorDesc, groups: usize, taps: TapMap) -> SubFilter {
        let ([k, cg], _, strides) = shape5(w);
        SubFilter { strides, taps, kg: k / groups, cg, groups, elem: w.dtype().size() }
    }
    pub fn packed_bytes(&self) -> usize { self.groups * self.cg * self.taps.count() * self.kg * self.elem }

    /// dst (`packed_bytes`) ← the sub-filter of w at `src`, on the device's stream.
    pub fn gather(&self, be: &CudaBackend, src: u64, dst: u64) -> Result<()> {
        if self.elem != 2 && self.elem != 4 {
            return Err(Error::not_implemented(format!("sub_filter: {}-byte elements", self.elem)));
        }
        let k = be.module("sub_filter", SOURCE)?.function("sub_filter")?;
        let s = self.strides;
        let axes = self.taps.axes;
        let total = (self.packed_bytes() / self.elem) as u64;
        let args = Args {
            src,
            dst,
            s_k: s[0] as i64,
            s_c: s[1] as i64,
            s_tap: [s[2] as i64, s[3] as i64, s[4] as i64],
            first: axes.map(|a| a.first as i32),
            step: axes.map(|a| a.step as i32),
            count: axes.map(|a| a.count as i32),
            kg: self.kg as i32,
            cg: self.cg as i32,
            elem: self.elem as i32,
            total: total as i64,
        };
        // SAFETY: Args mirrors the kernel's struct; src spans w (the caller's validated
        // filter; every source tap lies inside it by the tap map's construction), dst holds
        // `packed_bytes`; the grid-stride loop stays below `total`.
        unsafe { k.launch(&be.dev, (grid_for(be, total, 256), 1, 1), (256, 1, 1), 0, &args) }
    }
}
