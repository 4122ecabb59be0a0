//! Writing finished f32 results into a convolution tensor: α/β blend, fused epilogue, store in
//! the tensor's type and strides. Shared by the fast CPU solvers, which all hand over rows of
//! values of one (n, channel) at consecutive spatial positions.

use crate::backend::cpu::tensor_io::access::{load, store};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::pointwise::fused_store::bias_relu_store;
use crate::types::DataType;

/// Offsets (in elements, without the n and c terms) of each linear spatial index
/// d·H·W + h·W + w of a tensor with spatial lengths `dims` and 5-D strides `s`.
pub fn spatial_offsets(dims: [usize; 3], s: [usize; 5]) -> Vec<usize> {
    let mut v = Vec::with_capacity(dims.iter().product());
    for d in 0..dims[0] {
        for h in 0..dims[1] {
            for w in 0..dims[2] {
                v.push(d * s[2] + h * s[3] + w * s[4]);
            }
        }
    }
    v
}

/// Whether the offsets are consecutive (a packed row); only called once the ends agree.
fn dense(offs: &[usize]) -> bool {
    offs.windows(2).all(|w| w[1] == w[0] + 1)
}

/// One output tensor: where and how results are written.
pub struct OutTensor<'a> {
    pub ptr: u64,
    pub dt: DataType,
    pub strides: [usize; 5],
    pub dims: [usize; 3],
    pub sp_off: &'a [usize],
    pub alpha: f32,
    pub beta: f32,
    pub epi: &'a CpuEpilogue,
}

impl OutTensor<'_> {
    /// Spatial strides of a packed D×H×W block: every run of linear spatial indices is one
    /// contiguous row (NCHW-like), decided from the strides in O(1).
    fn packed_spatial(&self) -> bool {
        let [_, h, w] = self.dims;
        let s = self.strides;
        (s[4] == 1 || w <= 1) && (s[3] == w || h <= 1) && (s[2] == h * w || self.dims[0] <= 1)
    }

    /// Address of out[n, c, sp0] when results may be stored there directly as plain f32 values:
    /// f32, α = 1, β = 0, packed spatial rows (so consecutive sp are consecutive addresses).
    /// The caller applies the epilogue itself (see `CpuEpilogue::bias_relu_all`).
    pub fn direct_base(&self, n: usize, c: usize, sp0: usize) -> Option<*mut f32> {
        (self.dt == DataType::Float && self.alpha == 1.0 && self.beta == 0.0 && self.packed_spatial())
            // SAFETY (pointer arithmetic): (n, c, sp0) is inside the tensor.
            .then(|| unsafe { (self.ptr as *mut f32).add(n * self.strides[0] + c * self.strides[1] + self.sp_off[sp0]) })
    }

    /// out[n, c, sp0 + i] = epi(α·v[i] + β·out_old) for i in 0..v.len() (v is overwritten).
    /// β = 0 never reads the old value.
    ///
    /// # Safety
    /// The positions must be inside the tensor and not written concurrently by another thread.
    pub unsafe fn write_span(&self, v: &mut [f32], n: usize, c: usize, sp0: usize) {
        let base = n * self.strides[0] + c * self.strides[1];
        let offs = &self.sp_off[sp0..sp0 + v.len()];
        if v.is_empty() {
            return;
        }
        if self.dt == DataType::Float && self.alpha == 1.0 && self.beta == 0.0 && self.packed_spatial() {
            if let Some(fs) = self.epi.fused_store() {
                // One fused pass straight into y (the CBA case), then any activation the clamp
                // is not over the run just written, in cache.
                let y = std::slice::from_raw_parts_mut((self.ptr as *mut f32).add(base + offs[0]), v.len());
                bias_relu_store(v, y, fs.bias_of(c), fs.clamp);
                fs.finish(y);
                return;
            }
        }
        if self.alpha != 1.0 {
            v.iter_mut().for_each(|x| *x *= self.alpha);
        }
        if self.beta != 0.0 {
            for (x, &o) in v.iter_mut().zip(offs) {
                *x += self.beta * load(self.dt, self.ptr, base + o);
            }
        }
        if !self.epi.is_empty() {
            self.epi.apply_span(v, n, c, sp0, self.dims);
        }
        if self.dt == DataType::Float && (self.packed_spatial() || (offs[offs.len() - 1] == offs[0] + offs.len() - 1 && dense(offs))) {
            // Packed rows (NCHW): one slice copy.
            std::slice::from_raw_parts_mut((self.ptr as *mut f32).add(base + offs[0]), v.len()).copy_from_slice(v);
        } else if self.dt == DataType::Float {
            let y = self.ptr as *mut f32;
            for (x, &o) in v.iter().zip(offs) {
                *y.add(base + o) = *x;
            }
        } else {
            for (x, &o) in v.iter().zip(offs) {
                store(self.dt, self.ptr, base + o, *x);
            }
        }
    }
}
