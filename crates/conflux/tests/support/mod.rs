//! Test support shared by the device tests: one test body runs on every device
//! (`device_tests!` makes a `cpu` and a `cuda` test; the CUDA one reports itself skipped
//! when no GPU is found), tensors uploaded from f64 data and read back as f64.
#![allow(dead_code)]

use conflux::element::{decode, encode, round_to};
use conflux::reference::fill::{fill_for, Fill};
use conflux::{Buffer, DevPtr, Handle, TensorDesc};

/// A GPU handle, or None (with a note on stderr) when this machine has no usable GPU.
pub fn cuda() -> Option<Handle> {
    if std::env::var("CONFLUX_DEVICE").map(|v| v == "cpu").unwrap_or(false) {
        eprintln!("skipped: CONFLUX_DEVICE=cpu");
        return None;
    }
    match Handle::cuda(0) {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("skipped: no GPU ({e})");
            None
        }
    }
}

/// `device_tests!(name, |h: &Handle| { ... })` → `name::cpu` and `name::cuda`.
#[macro_export]
macro_rules! device_tests {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn cpu() {
                let h = conflux::Handle::cpu();
                ($body)(&h);
            }
            #[test]
            fn cuda() {
                if let Some(h) = crate::support::cuda() {
                    ($body)(&h);
                }
            }
        }
    };
}

/// A tensor on the handle's device plus the f64 values it holds (rounded to its type).
pub struct Dev {
    pub desc: TensorDesc,
    pub buf: Buffer,
    /// `desc.element_space()` values as stored (after rounding to the element type).
    pub host: Vec<f64>,
}

impl Dev {
    pub fn ptr(&self) -> DevPtr { self.buf.ptr() }
}

/// Upload `values` (element-space layout) as `desc`'s type.
pub fn upload(h: &Handle, desc: &TensorDesc, values: &[f64]) -> Dev {
    assert_eq!(values.len(), desc.element_space());
    let host: Vec<f64> = values.iter().map(|&v| round_to(desc.dtype(), v)).collect();
    let mut buf = h.alloc(desc.num_bytes()).unwrap();
    h.write(&mut buf, &encode(desc.dtype(), &host)).unwrap();
    Dev { desc: desc.clone(), buf, host }
}

/// Upload random data of the given kind (gaps between strided elements are NaN).
pub fn random(h: &Handle, desc: &TensorDesc, fill: Fill, seed: u64) -> Dev {
    upload(h, desc, &fill_for(desc, fill, seed))
}

/// An output tensor poisoned with NaN everywhere.
pub fn poisoned(h: &Handle, desc: &TensorDesc) -> Dev {
    upload(h, desc, &vec![f64::NAN; desc.element_space()])
}

/// Read a tensor back as f64 (element-space layout).
pub fn download(h: &Handle, t: &Dev) -> Vec<f64> {
    h.synchronize().unwrap();
    let bytes = h.read(&t.buf).unwrap();
    decode(t.desc.dtype(), &bytes[..t.desc.num_bytes()])
}

/// The logical elements of `data` (row-major N,C,…) through `desc`'s strides.
pub fn logical(desc: &TensorDesc, data: &[f64]) -> Vec<f64> {
    conflux::reference::strided::gather(desc, data)
}

/// Assert that `got` matches `want` (both logical order) within `tol`; NaN never passes.
#[track_caller]
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    if let Err(e) = conflux::reference::compare::check(got, want, tol) {
        panic!("{what}: {e}");
    }
}

/// Small deterministic RNG for choosing geometries.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.next() as usize % v.len()]
    }
}
