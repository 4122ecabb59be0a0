//! CUDA backend: dynamically loaded driver and NVRTC, kernels compiled at run time from
//! `.cu` templates plus a generated preamble, module cache in memory and on disk.

pub mod bias;
pub mod blas_lt;
pub mod compile;
pub mod driver;
pub mod fork;
pub mod im2col;
pub mod layout;
pub mod module;
pub mod pad;
pub mod params;
pub mod preamble;
pub mod scale;
pub mod split_counters;
pub mod sub_filter;
pub mod tensor_map;
pub mod tf32_split;

use crate::error::Result;
use super::{DeviceInfo, RunContext};
use driver::{CudaDevice, EventTimer};
use module::{Module, ModuleCache};
use std::sync::Arc;

/// A device plus its module cache: what a CUDA handle holds.
pub struct CudaBackend {
    pub dev: CudaDevice,
    pub modules: ModuleCache,
    /// The device's properties as solvers see them.
    pub info: DeviceInfo,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.dev.fmt(f)
    }
}

impl CudaBackend {
    pub fn open(ordinal: usize) -> Result<CudaBackend> {
        compile::nvrtc_version()?;
        let dev = CudaDevice::open(ordinal)?;
        let info = DeviceInfo::gpu(dev.name(), dev.compute_capability(), dev.sm_count());
        Ok(CudaBackend { dev, modules: ModuleCache::default(), info })
    }

    /// Module for `template` specialised by a generated preamble (cached).
    pub fn module(&self, name: &str, source: &str) -> Result<Arc<Module>> {
        self.modules.get(&self.dev, name, source, &self.dev.arch(), &[])
    }

    /// Like `module`, for the architecture-specific target (`sm_90a`: wgmma, setmaxnreg) that
    /// only runs on exactly this compute capability.
    pub fn module_arch_specific(&self, name: &str, source: &str) -> Result<Arc<Module>> {
        self.modules.get(&self.dev, name, source, &format!("{}a", self.dev.arch()), &[])
    }
}

/// Run `launches` on the device's stream; with profiling on, time them with events and
/// record the time in the run context (`miopenGetKernelTime`).
pub fn timed(ctx: &dyn RunContext, be: &CudaBackend, launches: impl FnOnce() -> Result<()>) -> Result<()> {
    be.dev.bind()?;
    if !ctx.profiling() {
        return launches();
    }
    let timer = EventTimer::new()?;
    timer.start(&be.dev)?;
    launches()?;
    let ms = timer.stop(&be.dev)?;
    ctx.record_kernel_time(ms);
    Ok(())
}

/// Grid size for a grid-stride loop over `total` items with `block` threads: enough blocks
/// to fill the device several times over, never more than needed.
pub fn grid_for(be: &CudaBackend, total: u64, block: u32) -> u32 {
    let need = total.div_ceil(block as u64).max(1);
    need.min(be.dev.sm_count() as u64 * 32).min(i32::MAX as u64) as u32
}
