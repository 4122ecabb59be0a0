//! Loaded modules and their in-memory cache. A module is compiled (or read from disk) once
//! per key even when threads race: the map holds a `OnceLock` per key, and the lock on the map
//! is released before compiling, so other keys are not blocked.

use super::compile;
use super::driver::{driver_err, CudaDevice};
use crate::error::{Error, Result};
use cudarc::driver::{result as cu, sys};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A loaded CUDA module with its functions looked up on demand.
pub struct Module {
    raw: sys::CUmodule,
    name: String,
    funcs: Mutex<HashMap<String, u64>>,
    pub from_disk: bool,
}

// SAFETY: CUmodule/CUfunction are context-wide handles, usable from any thread with the
// context current.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Module {
    /// The kernel `func` of this module.
    pub fn function(&self, func: &str) -> Result<Kernel> {
        let mut funcs = self.funcs.lock().unwrap();
        if let Some(&f) = funcs.get(func) {
            return Ok(Kernel(f as sys::CUfunction));
        }
        let cname = CString::new(func).unwrap();
        // SAFETY: raw is a loaded module.
        let f = unsafe { cu::module::get_function(self.raw, cname) }
            .map_err(|e| driver_err(&format!("cuModuleGetFunction({}::{func})", self.name), e))?;
        funcs.insert(func.to_string(), f as u64);
        Ok(Kernel(f))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded in `load`, unloaded once.
        unsafe {
            let _ = cu::module::unload(self.raw);
        }
    }
}

/// A kernel function handle.
#[derive(Clone, Copy)]
pub struct Kernel(sys::CUfunction);

// SAFETY: see Module.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Kernel {
    /// Allow launches with up to `bytes` of dynamic shared memory (needed above 48 KiB; the
    /// setting stays with the function, so it is made once when the invoker is built). Only
    /// ever raised: invokers that share a cached function must not shrink each other's limit.
    pub fn reserve_dynamic_smem(&self, dev: &CudaDevice, bytes: u32) -> Result<()> {
        if bytes <= 48 * 1024 {
            return Ok(());
        }
        dev.bind()?;
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        // SAFETY: self.0 is a function of a loaded module.
        let now = unsafe { cu::function::get_function_attribute(self.0, attr) }.map_err(|e| driver_err("cuFuncGetAttribute", e))?;
        if now >= bytes as i32 {
            return Ok(());
        }
        // SAFETY: self.0 is a function of a loaded module.
        unsafe { cu::function::set_function_attribute(self.0, attr, bytes as i32) }.map_err(|e| driver_err("cuFuncSetAttribute", e))
    }

    /// Launch with one by-value parameter block `params` (a `#[repr(C)]` struct mirrored in
    /// the kernel's source).
    ///
    /// # Safety
    /// `P` must match the kernel's single parameter type exactly, and every device pointer in
    /// it must be valid for the accesses the kernel makes.
    pub unsafe fn launch<P>(&self, dev: &CudaDevice, grid: (u32, u32, u32), block: (u32, u32, u32), smem: u32, params: &P) -> Result<()> {
        dev.bind()?;
        let mut args: [*mut c_void; 1] = [params as *const P as *mut c_void];
        cu::launch_kernel(self.0, grid, block, smem, dev.stream(), &mut args).map_err(|e| driver_err("cuLaunchKernel", e))
    }
}

/// In-memory module cache of one device.
#[derive(Default)]
pub struct ModuleCache {
    map: Mutex<HashMap<String, Arc<OnceLock<std::result::Result<Arc<Module>, Error>>>>>,
    compiles: AtomicU64,
}

impl ModuleCache {
    /// Number of modules compiled or loaded from disk by this cache.
    pub fn loads(&self) -> u64 { self.compiles.load(Ordering::Relaxed) }

    /// The module for (`name`, `source`, `arch`, `opts`), compiled at most once per process.
    pub fn get(&self, dev: &CudaDevice, name: &str, source: &str, arch: &str, opts: &[&str]) -> Result<Arc<Module>> {
        let key = crate::cache::hash_key(&[source.as_bytes(), arch.as_bytes(), opts.join(" ").as_bytes()]);
        let cell = self.map.lock().unwrap().entry(key).or_default().clone();
        cell.get_or_init(|| {
            self.compiles.fetch_add(1, Ordering::Relaxed);
            let t = std::time::Instant::now();
            let c = compile::compile(name, source, arch, opts)?;
            let compiled = t.elapsed();
            let m = load(dev, name, &c.cubin, c.from_disk)?;
            let (compile_ms, total_ms) = (compiled.as_secs_f64() * 1e3, t.elapsed().as_secs_f64() * 1e3);
            tracing::debug!(kernel = name, from_disk = c.from_disk, compile_ms, total_ms, "module ready");
            if compile_log() {
                let how = if c.from_disk { "read from the cache" } else { "compiled" };
                eprintln!("conflux: module {name} {how} in {compile_ms:.1} ms, ready in {total_ms:.1} ms");
            }
            Ok(Arc::new(m))
        })
        .clone()
    }
}

/// `CONFLUX_LOG=compile`: one stderr line per module made ready (cold-compile work).
fn compile_log() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| crate::log_cmd::topic_requested("compile"))
}

fn load(dev: &CudaDevice, name: &str, cubin: &[u8], from_disk: bool) -> Result<Module> {
    dev.bind()?;
    // SAFETY: cubin is a complete image produced by NVRTC (or verified from the disk cache).
    let raw = unsafe { cu::module::load_data(cubin.as_ptr() as *const c_void) }.map_err(|e| driver_err(&format!("cuModuleLoadData({name})"), e))?;
    Ok(Module { raw, name: name.to_string(), funcs: Mutex::new(HashMap::new()), from_disk })
}
