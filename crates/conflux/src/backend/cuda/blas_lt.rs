//! One cuBLASLt matrix multiply with a bias / ReLU epilogue, planned once (descriptors and
//! the library's heuristic choice of algorithm) and run many times on the handle's stream.
//! cuBLASLt is loaded at run time like the driver; without it the planner says so.
//!
//! Column-major, as cuBLASLt sees it: D (m × n) = act(α·op(A)·op(B) + β·C + bias), bias of
//! length m, with C = D; op(A) is Aᵀ (A stored k × m) or A (stored m × k), op(B) is B (stored
//! k × n) or Bᵀ (stored n × k).

use crate::error::{Error, Result};
use crate::types::DataType;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

/// Whether libcublasLt can be loaded (looked up once).
pub fn available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the library.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// A solver's refusal when libcublasLt cannot be loaded.
pub fn check_available() -> std::result::Result<(), String> {
    if available() { Ok(()) } else { Err("libcublasLt not found".into()) }
}

/// The epilogues conflux maps onto cuBLASLt's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LtEpilogue {
    None,
    Bias,
    Relu,
    BiasRelu,
}

/// Shape and types of one multiply: D (m × n, leading dimension ldd) from A stored k × m
/// (`trans_a`) or m × k (lda) and B stored k × n or n × k (`trans_b`; ldb), all of `dtype`
/// except D when `f32_out` (partial sums that a later pass adds up);
/// `tf32` lets f32 products use TF32 tensor cores; `align` (bytes, a power of two of at most
/// `LT_ALIGN`) divides every pointer and every leading dimension in bytes.
#[derive(Clone, Copy, Debug)]
pub struct LtShape {
    pub dtype: DataType,
    pub tf32: bool,
    pub f32_out: bool,
    pub align: u64,
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub lda: i64,
    pub ldb: i64,
    pub ldd: i64,
    pub epilogue: LtEpilogue,
    pub batch: LtBatch,
}

/// A strided batch of multiplies of one shape: matrix i of A, B and D starts i × its stride
/// elements after the first (a stride of 0 shares one matrix across the batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LtBatch {
    pub count: u32,
    pub stride_a: i64,
    pub stride_b: i64,
    pub stride_d: i64,
}

impl LtBatch {
    pub const ONE: LtBatch = LtBatch { count: 1, stride_a: 0, stride_b: 0, stride_d: 0 };
}

/// The pointer and leading-dimension alignment the fastest algorithms need; plans for less
/// admit only the algorithms that work with it.
pub const LT_ALIGN: u64 = 16;

/// The largest power of two up to `LT_ALIGN` dividing every one of `bytes`.
pub fn common_alignment(bytes: &[u64]) -> u64 {
    bytes.iter().fold(LT_ALIGN, |a, &b| a.min(if b == 0 { LT_ALIGN } else { 1 << b.trailing_zeros() }))
}
/// The most workspace an algorithm may ask for (split-K reductions).
const MAX_WORKSPACE: usize = 8 << 20;

struct Raw {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
}

/// A planned multiply. The descriptor's bias pointer is set per run, so runs take a lock.
pub struct LtGemm {
    raw: Mutex<Raw>,
    algo: sys::cublasLtMatmulAlgo_t,
    /// Workspace bytes the chosen algorithm needs.
    pub workspace: usize,
    /// The alignment (bytes) every pointer passed to `run` must have.
    pub align: u64,
    epilogue: LtEpilogue,
}

// SAFETY: cuBLASLt handles and descriptors may be used from any thread; every use goes
// through the mutex, and the algorithm is plain data.
unsafe impl Send for LtGemm {}
unsafe impl Sync for LtGemm {}

fn lt_err(what: &str, e: lt::CublasError) -> Error {
    Error::internal(format!("cuBLASLt {what}: {e}"))
}

fn data_type(dt: DataType) -> Result<sys::cudaDataType> {
    match dt {
        DataType::Half => Ok(sys::cudaDataType::CUDA_R_16F),
        DataType::BFloat16 => Ok(sys::cudaDataType::CUDA_R_16BF),
        DataType::Float => Ok(sys::cudaDataType::CUDA_R_32F),
        other => Err(Error::unsupported(format!("cuBLASLt GEMM: {other:?} data"))),
    }
}

/// Set one descriptor attribute from a plain value.
unsafe fn set_desc<T>(desc: sys::cublasLtMatmulDesc_t, attr: sys::cublasLtMatmulDescAttributes_t, v: &T) -> Result<()> {
    lt::set_matmul_desc_attribute(desc, attr, v as *const T as *const c_void, std::mem::size_of::<T>()).map_err(|e| lt_err("set descriptor attribute", e))
}

impl LtGemm {
    /// Describe the multiply and ask cuBLASLt for its best algorithm. Needs the device's
    /// context current on this thread.
    pub fn plan(s: &LtShape) -> Result<LtGemm> {
        if !available() {
            return Err(Error::unsupported("cuBLASLt GEMM: libcublasLt not found"));
        }
        let ty = data_type(s.dtype)?;
        let compute = match (s.dtype, s.tf32) {
            (DataType::Float, true) => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            _ => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        };
        let handle = lt::create_handle().map_err(|e| lt_err("create", e))?;
        let mut raw = Raw { handle, desc: std::ptr::null_mut(), layouts: [std::ptr::null_mut(); 3] };
        // From here on `raw` is dropped (destroying what exists) on any error.
        raw.desc = lt::create_matmul_desc(compute, sys::cudaDataType::CUDA_R_32F).map_err(|e| lt_err("create descriptor", e))?;
        let epi = match s.epilogue {
            LtEpilogue::None => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
            LtEpilogue::Bias => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            LtEpilogue::Relu => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU,
            LtEpilogue::BiasRelu => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
        };
        let op = |t: bool| -> i32 { if t { 1 } else { 0 } }; // CUBLAS_OP_T, CUBLAS_OP_N
        // SAFETY: the descriptor was just created; values have the attribute's C types.
        unsafe {
            set_desc(raw.desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, &op(s.trans_a))?;
            set_desc(raw.desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, &op(s.trans_b))?;
            set_desc(raw.desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE, &epi)?;
        }
        let layout = |rows: u64, cols: u64, ld: i64| lt::create_matrix_layout(ty, rows, cols, ld).map_err(|e| lt_err("create layout", e));
        raw.layouts[0] = if s.trans_a { layout(s.k, s.m, s.lda)? } else { layout(s.m, s.k, s.lda)? };
        raw.layouts[1] = if s.trans_b { layout(s.n, s.k, s.ldb)? } else { layout(s.k, s.n, s.ldb)? };
        raw.layouts[2] = if s.f32_out {
            lt::create_matrix_layout(sys::cudaDataType::CUDA_R_32F, s.m, s.n, s.ldd).map_err(|e| lt_err("create layout", e))?
        } else {
            layout(s.m, s.n, s.ldd)?
        };
        if s.batch.count > 1 {
            let count = i32::try_from(s.batch.count).map_err(|_| Error::unsupported(format!("cuBLASLt GEMM: a batch of {}", s.batch.count)))?;
            for (l, stride) in raw.layouts.iter().zip([s.batch.stride_a, s.batch.stride_b, s.batch.stride_d]) {
                // SAFETY: a live layout; i32 / i64 values as the attributes take them.
                unsafe {
                    let set = |attr, v: *const c_void, n| lt::set_matrix_layout_attribute(*l, attr, v, n).map_err(|e| lt_err("set layout attribute", e));
                    set(sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count as *const i32 as *const c_void, 4)?;
                    set(sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride as *const i64 as *const c_void, 8)?;
                }
            }
        }
        let pref = Pref(lt::create_matmul_pref().map_err(|e| lt_err("create preference", e))?);
        // SAFETY: valid preference; u64 / u32 values as the attributes take them.
        unsafe {
            let set = |attr, v: *const c_void, n| lt::set_matmul_pref_attribute(pref.0, attr, v, n).map_err(|e| lt_err("set preference", e));
            let ws = MAX_WORKSPACE as u64;
            set(sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws as *const u64 as *const c_void, 8)?;
            let align = s.align as u32;
            for attr in [
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            ] {
                set(attr, &align as *const u32 as *const c_void, 4)?;
            }
        }
        let [a, b, d] = raw.layouts;
        // SAFETY: every object is alive and describes this multiply.
        let found = unsafe { lt::get_matmul_algo_heuristic(raw.handle, raw.desc, a, b, d, d, pref.0) }.map_err(|e| lt_err("algorithm heuristic (no algorithm for this multiply)", e))?;
        Ok(LtGemm { raw: Mutex::new(raw), algo: found.algo, workspace: found.workspaceSize, align: s.align, epilogue: s.epilogue })
    }

    /// Whether `run` reads a bias vector.
    pub fn reads_bias(&self) -> bool { matches!(self.epilogue, LtEpilogue::Bias | LtEpilogue::BiasRelu) }

    /// D = act(α·op(A)·op(B) + β·D + bias) on `stream`. Pointers must be `self.align`-aligned device
    /// memory of the planned shapes; `bias` is read only by bias epilogues; `workspace` holds
    /// `self.workspace` bytes.
    ///
    /// # Safety
    /// The pointers must be valid for the planned shapes on this device, and stay valid until
    /// the work on `stream` completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run(&self, stream: u64, alpha: f32, beta: f32, a: u64, b: u64, d: u64, bias: u64, workspace: u64) -> Result<()> {
        let raw = self.raw.lock().map_err(|_| Error::internal("cuBLASLt GEMM: lock poisoned"))?;
        if self.reads_bias() {
            let p = bias as *const c_void;
            set_desc(raw.desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p)?;
        }
        let [la, lb, ld] = raw.layouts;
        lt::matmul(
            raw.handle,
            raw.desc,
            &alpha as *const f32 as *const c_void,
            &beta as *const f32 as *const c_void,
            a as *const c_void,
            la,
            b as *const c_void,
            lb,
            d as *const c_void,
            ld,
            d as *mut c_void,
            ld,
            &self.algo,
            workspace as *mut c_void,
            self.workspace,
            stream as sys::cudaStream_t,
        )
        .map_err(|e| lt_err("matmul", e))
    }
}

struct Pref(sys::cublasLtMatmulPreference_t);

impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: created by create_matmul_pref, destroyed once.
        unsafe {
            let _ = lt::destroy_matmul_pref(self.0);
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: each object was created by cuBLASLt (null ones never were) and is destroyed once.
        unsafe {
            for l in self.layouts {
                if !l.is_null() {
                    let _ = lt::destroy_matrix_layout(l);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::destroy_matmul_desc(self.desc);
            }
            let _ = lt::destroy_handle(self.handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::common_alignment;

    #[test]
    fn alignment_is_the_largest_common_power_of_two() {
        assert_eq!(common_alignment(&[64, 128, 4096]), 16);
        assert_eq!(common_alignment(&[24, 32]), 8);
        assert_eq!(common_alignment(&[42, 64]), 2);
        assert_eq!(common_alignment(&[0, 20]), 4);
    }
}
