//! The one test-support module of the conflux integration tests.
//!
//! * Devices: `device_tests!` makes a `cpu` and a `cuda` test of one body, `cuda_tests!` only a
//!   `cuda` one (for bodies that test CUDA solvers and would do nothing on the CPU). The CUDA
//!   test reports itself skipped when no GPU is found, or fails instead when
//!   `CONFLUX_REQUIRE_GPU` is set (to anything but empty or `0`), as on the GPU machine.
//! * Tensors uploaded from f64 data and read back as f64, poisoned, sentinel and misaligned
//!   copies, and the assertions on them.
//! * One RNG: the library's `SplitMix64`, with the `Pick` helpers for choosing geometries.
//! * Solution ids looked up by solver name (`solution_id`), never written as numbers.
//! * `conv_case`: one convolution in user roles (`ConvCase`), its directions (`Dir`) and
//!   `check_solver`, which holds one solver to every check the suites make.
//! * `layouts`: Float descriptors in several layouts and random small geometries for the
//!   reference tests; `cba` and `wgrad`: cases shared by the tensor-core suites.
#![allow(dead_code)]

use conflux::element::{decode, encode, round_to};
use conflux::handle::DeviceKind;
use conflux::reference::fill::{fill_for, Fill};
use conflux::solver::Solver;
use conflux::{Buffer, DevPtr, Handle, TensorDesc};

pub use conflux::reference::SplitMix64;

pub mod cba;
pub mod conv_case;
pub mod depthwise;
pub mod layouts;
pub mod wgrad;

#[allow(unused_imports)] // each test binary uses some of them
pub use conv_case::{applicable_ids, check_chosen_cases, check_every_configuration, check_every_configuration_in, check_exact_and_scaled, check_misaligned_forward, check_refuses, check_solver, grouped_case, ConvCase, Dir, GroupedSpec};

/// Point the cache (compiled kernels, find-db) at a per-process temporary directory unless
/// the runner chose one with `CONFLUX_CACHE_DIR`, so tests never touch the user's home.
/// Called first by every device test, before any handle exists.
pub fn isolate_cache() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("CONFLUX_CACHE_DIR").is_none_or(|d| d.is_empty()) {
            let dir = std::env::temp_dir().join(format!("conflux-test-cache-{}", std::process::id()));
            std::env::set_var("CONFLUX_CACHE_DIR", dir);
        }
    });
}

/// Whether `CONFLUX_REQUIRE_GPU` is set to anything but empty or `0`: then a CUDA test that
/// finds no usable GPU fails instead of reporting itself skipped.
pub fn require_gpu() -> bool {
    std::env::var("CONFLUX_REQUIRE_GPU").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Skip (a note on stderr, None) or, under `CONFLUX_REQUIRE_GPU`, fail with the reason.
fn skip_cuda(why: &str) -> Option<Handle> {
    if require_gpu() {
        panic!("CONFLUX_REQUIRE_GPU is set but the CUDA test cannot run: {why}");
    }
    eprintln!("skipped: {why}");
    None
}

/// A GPU handle, or None (with a note on stderr) when this machine has no usable GPU or
/// `CONFLUX_DEVICE=cpu`; panics instead of returning None under `CONFLUX_REQUIRE_GPU`.
pub fn cuda() -> Option<Handle> {
    if std::env::var("CONFLUX_DEVICE").is_ok_and(|v| v == "cpu") {
        return skip_cuda("CONFLUX_DEVICE=cpu");
    }
    match Handle::cuda(0) {
        Ok(h) => Some(h),
        Err(e) => skip_cuda(&format!("no GPU ({e})")),
    }
}

/// A new handle on the same device as `h` (its own invoker cache and find-db view).
pub fn fresh(h: &Handle) -> Handle {
    match h.device_kind() {
        DeviceKind::Cpu => Handle::cpu(),
        DeviceKind::Cuda => Handle::cuda(0).expect("a second handle on the GPU"),
    }
}

/// Run `body` on the CPU handle (the `cpu` test of `device_tests!`).
pub fn on_cpu(body: impl FnOnce(&Handle)) {
    isolate_cache();
    body(&Handle::cpu());
}

/// Run `body` on the GPU handle, or skip (fail under `CONFLUX_REQUIRE_GPU`) without a GPU:
/// the `cuda` test of `device_tests!` and `cuda_tests!`.
pub fn on_cuda(body: impl FnOnce(&Handle)) {
    isolate_cache();
    if let Some(h) = cuda() {
        assert_eq!(h.device_kind(), DeviceKind::Cuda);
        body(&h);
    }
}

/// `device_tests!(name, |h: &Handle| { ... })` → `name::cpu` and `name::cuda`: one body that
/// must do real work on both devices.
#[macro_export]
#[allow(clippy::crate_in_macro_def)] // `crate` is the test binary using the macro, by design
macro_rules! device_tests {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn cpu() {
                crate::support::on_cpu($body);
            }
            #[test]
            fn cuda() {
                crate::support::on_cuda($body);
            }
        }
    };
}

/// `cuda_tests!(name, |h: &Handle| { ... })` → `name::cuda` only: a body about CUDA solvers,
/// which has nothing to do on the CPU (no empty `cpu` twin that passes vacuously).
#[macro_export]
#[allow(clippy::crate_in_macro_def)] // `crate` is the test binary using the macro, by design
macro_rules! cuda_tests {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn cuda() {
                crate::support::on_cuda($body);
            }
        }
    };
}

/// The registered solver called `name` (its `name()`); panics when there is none.
#[track_caller]
pub fn solver(name: &str) -> &'static dyn Solver {
    conflux::solver::find_by_name(name).unwrap_or_else(|| panic!("no solver is registered as {name:?}"))
}

/// The solution id of the solver called `name`, from the registry: tests name solvers and
/// never write their ids as numbers.
#[track_caller]
pub fn solution_id(name: &str) -> u64 {
    solver(name).solution_id()
}

/// Geometry choices on the library's RNG. `range` and `pick` take one `next_u64` each (the
/// stream the suites' seeds were chosen with).
pub trait Pick {
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: usize, hi: usize) -> usize;
    /// One of `v`.
    fn pick<T: Copy>(&mut self, v: &[T]) -> T;
}

impl Pick for SplitMix64 {
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[(self.next_u64() % v.len() as u64) as usize]
    }
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

/// `t`'s values again, one element past a 16-byte boundary: returns the buffer (keep it alive)
/// and the misaligned address of the copy, for the fallbacks of kernels that need aligned
/// pointers.
pub fn misaligned_copy(h: &Handle, t: &Dev) -> (Dev, DevPtr) {
    let desc = TensorDesc::new(t.desc.dtype(), &[t.desc.element_space() + 8]).unwrap();
    let vals: Vec<f64> = std::iter::once(0.0).chain(t.host.iter().copied()).chain([0.0; 7]).collect();
    let copy = upload(h, &desc, &vals);
    let ptr = copy.ptr().add(t.desc.dtype().size());
    (copy, ptr)
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

/// Memory arrangement of a test tensor (lengths always N,C,(D,)H,W).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lay {
    /// Packed NCHW / NCDHW.
    Packed,
    /// Packed NHWC / NDHWC.
    ChannelsLast,
    /// NCHW order with every extent padded by one (gaps after every row of every dim).
    Gapped,
    /// Channels-last order with every extent padded by one.
    GappedChannelsLast,
}

/// Strides over `lens` taken in `order` (outermost first), each extent padded by `pad`.
fn strides_in(lens: &[usize], order: &[usize], pad: usize) -> Vec<usize> {
    let mut strides = vec![0; lens.len()];
    let mut acc = 1;
    for &d in order.iter().rev() {
        strides[d] = acc;
        acc *= lens[d] + pad;
    }
    strides
}

/// A descriptor of type `dt` with `lens` arranged as `lay`.
pub fn desc(dt: conflux::DataType, lens: &[usize], lay: Lay) -> TensorDesc {
    let nchw: Vec<usize> = (0..lens.len()).collect();
    let mut cl: Vec<usize> = vec![0];
    cl.extend(2..lens.len());
    cl.push(1);
    let (order, pad) = match lay {
        Lay::Packed => (nchw, 0),
        Lay::ChannelsLast => (cl, 0),
        Lay::Gapped => (nchw, 1),
        Lay::GappedChannelsLast => (cl, 1),
    };
    TensorDesc::with_strides(dt, lens, &strides_in(lens, &order, pad)).unwrap()
}

/// A tensor whose whole element space (gaps included) holds `v`: a sentinel for
/// buffers that an operation must leave untouched.
pub fn sentinel(h: &Handle, desc: &TensorDesc, v: f64) -> Dev {
    upload(h, desc, &vec![v; desc.element_space()])
}

/// Assert that the device buffer still holds exactly what was uploaded (NaN matches NaN).
#[track_caller]
pub fn assert_unchanged(what: &str, h: &Handle, t: &Dev) {
    let now = download(h, t);
    for (i, (a, b)) in now.iter().zip(&t.host).enumerate() {
        assert!(a == b || (a.is_nan() && b.is_nan()), "{what}: element {i} was changed from {b} to {a}");
    }
}

/// Assert that every element-space position of `data` outside `desc`'s elements (the gaps)
/// is still NaN, i.e. nothing was written between the described elements.
#[track_caller]
pub fn assert_gaps_untouched(what: &str, desc: &TensorDesc, data: &[f64]) {
    let mut inside = vec![false; desc.element_space()];
    for o in conflux::reference::strided::offsets(desc) {
        inside[o] = true;
    }
    for (i, (&v, &ins)) in data.iter().zip(&inside).enumerate() {
        assert!(ins || v.is_nan(), "{what}: gap position {i} was written ({v})");
    }
}

/// Activation parameters (α, β, γ) that exercise each mode (TANH's β ≠ 0 for backward,
/// POWER's base mostly positive, CLIPPEDRELU's clip inside the data range).
pub fn act_params(mode: conflux::ActivationMode) -> (f64, f64, f64) {
    use conflux::ActivationMode::*;
    match mode {
        Tanh => (0.8, 1.3, 0.0),
        Power => (1.0, 0.3, 2.0),
        ClippedRelu => (1.5, 0.0, 0.0),
        LeakyRelu => (0.1, 0.0, 0.0),
        Elu => (0.7, 0.0, 0.0),
        _ => (0.0, 0.0, 0.0),
    }
}

/// Assert an error with exactly `status` whose reason contains every one of `needles`.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(what: &str, r: conflux::Result<T>, status: conflux::Status, needles: &[&str]) -> conflux::Error {
    match r {
        Ok(v) => panic!("{what}: expected {status:?}, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.status, status, "{what}: wrong status; reason: {}", e.reason);
            for n in needles {
                assert!(e.reason.contains(n), "{what}: reason does not mention {n:?}: {}", e.reason);
            }
            e
        }
    }
}
