//! Run-time compilation with NVRTC, for the device's own architecture, with a disk cache of
//! the resulting cubins keyed by (source, options, arch, NVRTC version).

use crate::cache;
use crate::error::{Error, Result};
use cudarc::nvrtc::{result as nv, sys as nvsys};
use std::ffi::CString;

const CUBIN_MAGIC: &[u8; 8] = b"CFXCUBN1";

/// True when the NVRTC library can be loaded.
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { nvsys::is_culib_present() }
}

/// NVRTC's version (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    if !nvrtc_present() {
        return Err(Error::not_implemented("CUDA backend: NVRTC library (libnvrtc.so) not found; add the CUDA lib64 folder to LD_LIBRARY_PATH"));
    }
    let (mut a, mut b) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe { nvsys::nvrtcVersion(&mut a, &mut b) }
        .result()
        .map_err(|e| Error::internal(format!("nvrtcVersion failed: {e:?}")))?;
    Ok((a, b))
}

/// A compiled program: the cubin plus the key it was cached under.
pub struct Compiled {
    pub cubin: Vec<u8>,
    pub key: String,
    /// True when the cubin came from the disk cache.
    pub from_disk: bool,
}

/// Compile `source` (program `name`) for `arch` (e.g. `sm_90`), or load it from the disk cache.
pub fn compile(name: &str, source: &str, arch: &str, extra_opts: &[&str]) -> Result<Compiled> {
    let (maj, min) = nvrtc_version()?;
    let mut opts: Vec<String> = vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()];
    opts.extend(extra_opts.iter().map(|s| s.to_string()));
    let opt_text = opts.join(" ");
    let ver = format!("nvrtc {maj}.{min}");
    let key = cache::hash_key(&[source.as_bytes(), opt_text.as_bytes(), arch.as_bytes(), ver.as_bytes()]);
    let file = format!("{key}.cubin");
    let dir = cache::cache_dir().map(|d| d.join("cuda"));
    if std::env::var_os("CONFLUX_DISABLE_CACHE").is_none() {
        if let Some(bin) = dir.as_deref().and_then(|d| cache::read_entry(d, &file, CUBIN_MAGIC)) {
            return Ok(Compiled { cubin: bin, key, from_disk: true });
        }
    }
    if let Ok(p) = std::env::var("CONFLUX_DUMP_KERNELS") {
        let _ = std::fs::create_dir_all(&p);
        let _ = std::fs::write(std::path::Path::new(&p).join(format!("{name}-{}.cu", &key[..12])), source);
    }
    let cubin = nvrtc_compile(name, source, &opts)?;
    if let Some(d) = dir.as_deref() {
        if let Err(e) = cache::write_entry(d, &file, CUBIN_MAGIC, &cubin) {
            tracing::warn!(error = %e, "could not write the kernel cache");
        }
    }
    Ok(Compiled { cubin, key, from_disk: false })
}

fn nvrtc_compile(name: &str, source: &str, opts: &[String]) -> Result<Vec<u8>> {
    let src = CString::new(source).map_err(|_| Error::internal(format!("kernel {name}: source contains a NUL byte")))?;
    let cname = CString::new(format!("{name}.cu")).unwrap();
    let prog = nv::create_program(&src, Some(&cname)).map_err(|e| Error::internal(format!("nvrtcCreateProgram({name}): {e:?}")))?;
    // SAFETY: prog is a live program until destroy_program below.
    let result = unsafe {
        let compiled = nv::compile_program(prog, opts);
        let log = nv::get_program_log(prog)
            .map(|l| {
                let bytes: Vec<u8> = l.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default();
        match compiled {
            Err(e) => Err(Error::internal(format!("NVRTC failed to compile program {name}.cu ({e:?}):\n{log}"))),
            Ok(()) => {
                // Advisories of a successful compile (ptxas: "wgmma ... serialized", spills)
                // are worth seeing while tuning kernels.
                if !log.trim().is_empty() && std::env::var_os("CONFLUX_NVRTC_LOG").is_some() {
                    eprintln!("NVRTC log of {name}.cu:\n{log}");
                }
                let mut size = 0usize;
                nvsys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| Error::internal(format!("nvrtcGetCUBINSize({name}): {e:?}")))?;
                let mut buf = vec![0u8; size];
                nvsys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut _)
                    .result()
                    .map_err(|e| Error::internal(format!("nvrtcGetCUBIN({name}): {e:?}")))?;
                Ok(buf)
            }
        }
    };
    // SAFETY: created above, destroyed once.
    unsafe {
        let _ = nv::destroy_program(prog);
    }
    result
}
