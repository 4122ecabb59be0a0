//! What every fuzzed call shares: a seeded generator, host buffers with guard zones, the
//! checks (a status MIOpen defines, a bounded time, nothing written on failure, the f64
//! reference on success) and the findings they record.

use conflux::reference::SplitMix64;
use conflux::TensorDesc;
use std::ffi::{c_void, CStr};
use std::time::{Duration, Instant};
use MIOpen::handle::confluxGetLastErrorMessage;

/// The reference's SplitMix64: the same seed gives the same call sequence on every machine.
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed ^ 0x9e37_79b9_7f4a_7c15))
    }
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        self.0.next_int(lo, hi)
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.0.next_f64() < p
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[(self.next() % v.len() as u64) as usize]
    }
    /// A small integer as f32 (products and short sums stay exact).
    pub fn small_int(&mut self, r: i64) -> f32 {
        self.range(-r, r) as f32
    }
}

/// Elements around every buffer that no call may write.
const GUARD: usize = 64;
const GUARD_BITS: u32 = 0x7fc0_dead;
/// The poison a fresh output holds: a NaN no computation produces.
pub const POISON_BITS: u32 = 0x7fa0_beef;

/// An f32 host buffer with guard zones on both sides.
pub struct HostBuf {
    data: Vec<f32>,
    len: usize,
}

impl HostBuf {
    pub fn poisoned(len: usize) -> HostBuf {
        let mut data = vec![f32::from_bits(GUARD_BITS); len + 2 * GUARD];
        data[GUARD..GUARD + len].fill(f32::from_bits(POISON_BITS));
        HostBuf { data, len }
    }
    pub fn filled(len: usize, mut f: impl FnMut() -> f32) -> HostBuf {
        let mut b = HostBuf::poisoned(len);
        b.body_mut().iter_mut().for_each(|v| *v = f());
        b
    }
    pub fn ptr(&mut self) -> *mut c_void {
        self.data[GUARD..].as_mut_ptr().cast()
    }
    pub fn body(&self) -> &[f32] {
        &self.data[GUARD..GUARD + self.len]
    }
    pub fn body_mut(&mut self) -> &mut [f32] {
        let len = self.len;
        &mut self.data[GUARD..GUARD + len]
    }
    pub fn f64s(&self) -> Vec<f64> {
        self.body().iter().map(|v| *v as f64).collect()
    }
    pub fn guards_intact(&self) -> bool {
        let (head, rest) = self.data.split_at(GUARD);
        head.iter().chain(&rest[self.len..]).all(|v| v.to_bits() == GUARD_BITS)
    }
    pub fn bits(&self) -> Vec<u32> {
        self.body().iter().map(|v| v.to_bits()).collect()
    }
}

/// Everything a run found, with enough to reproduce each finding.
#[derive(Default)]
pub struct Stats {
    pub calls: u64,
    pub successes: u64,
    /// Successful calls whose output was compared with the reference, by entry point.
    pub checked: std::collections::BTreeMap<String, u64>,
    pub by_status: [u64; 11],
    pub findings: Vec<String>,
    /// The scenario being run (named in findings).
    pub context: String,
}

/// A call slower than this on tiny tensors is a finding (a hang or a runaway allocation).
const SLOW: Duration = Duration::from_secs(20);

impl Stats {
    pub fn finding(&mut self, what: String) {
        if self.findings.len() < 200 {
            self.findings.push(format!("{}: {what}", self.context));
        }
    }

    /// Make one C call: its status must be one MIOpen defines and it must return in time.
    pub fn call(&mut self, name: &str, f: impl FnOnce() -> i32) -> i32 {
        let start = Instant::now();
        let status = f();
        let took = start.elapsed();
        self.calls += 1;
        if !(0..=10).contains(&status) {
            self.finding(format!("{name} returned status {status}, which miopenStatus_t does not define"));
        } else {
            self.by_status[status as usize] += 1;
            if status == 0 {
                self.successes += 1;
            } else if last_error().is_empty() {
                self.finding(format!("{name} failed with status {status} and no reason"));
            }
        }
        if took > SLOW {
            self.finding(format!("{name} took {took:?}"));
        }
        status
    }

    /// A call the generator knows to be invalid must not succeed.
    pub fn expect_failure(&mut self, name: &str, status: i32, why: &str) {
        if status == 0 {
            self.finding(format!("{name} accepted an invalid request ({why})"));
        }
    }

    /// After a failed call the output must hold exactly what it held before.
    pub fn unchanged(&mut self, name: &str, out: &HostBuf, before: &[u32]) {
        if !out.guards_intact() {
            self.finding(format!("{name} wrote outside its output"));
        } else if out.bits() != before {
            self.finding(format!("{name} failed but wrote its output"));
        }
    }

    /// After a successful call: every element the reference wrote matches, every other one
    /// (gaps between strided rows) is untouched, and the guard zones are intact.
    pub fn matches(&mut self, name: &str, got: &HostBuf, before: &[u32], want: &[f64], tol: f64) {
        let scale: Vec<f64> = want.iter().map(|w| w.abs()).collect();
        self.matches_scaled(name, got, before, want, &scale, tol);
    }

    /// `matches` with element i held to tol·(1 + scale[i]): scale bounds the magnitude of the
    /// terms summed into it, where the result itself may cancel to far less.
    pub fn matches_scaled(&mut self, name: &str, got: &HostBuf, before: &[u32], want: &[f64], scale: &[f64], tol: f64) {
        *self.checked.entry(name.to_string()).or_default() += 1;
        if !got.guards_intact() {
            self.finding(format!("{name} wrote outside its output"));
            return;
        }
        for (i, (((g, w), b), m)) in got.body().iter().zip(want).zip(before).zip(scale).enumerate() {
            // An infinite reference (a max over a window wholly in the padding) must be met exactly.
            let ok = if w.is_nan() { g.to_bits() == *b } else if w.is_infinite() { *g as f64 == *w } else { g.is_finite() && (*g as f64 - w).abs() <= tol * (1.0 + m.max(w.abs())) };
            if !ok {
                self.finding(format!("{name} succeeded with a wrong answer: element {i} is {g}, the reference {w}"));
                return;
            }
        }
    }
}

/// CONFLUX_FUZZ_TRACE=1: scenarios describe themselves on stderr before they run.
pub fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("CONFLUX_FUZZ_TRACE").is_ok_and(|v| v == "1"))
}

/// Tensors here hold at most ~10⁶ elements: a workspace past this is a finding, and the fuzzer
/// does not allocate it.
pub const MAX_WORKSPACE: usize = 1 << 30;

pub fn last_error() -> String {
    unsafe { CStr::from_ptr(confluxGetLastErrorMessage()) }.to_string_lossy().into_owned()
}

/// The reference's view of an output: the buffer's values, with positions outside the tensor
/// (and untouched poison) as NaN, which `matches` compares bit for bit.
pub fn want_from(buf: &HostBuf) -> Vec<f64> {
    buf.body().iter().map(|v| if v.is_nan() { f64::NAN } else { *v as f64 }).collect()
}

/// Strides for `lens` (N, C, spatial order): packed, channels-last or with gaps.
pub fn strides_for(r: &mut Rng, lens: &[usize]) -> Vec<usize> {
    let n = lens.len();
    let order: Vec<usize> = match r.range(0, 2) {
        // Channels-last: C innermost, then spatial, then N.
        1 if n >= 3 => std::iter::once(0).chain(2..n).chain(std::iter::once(1)).collect(),
        _ => (0..n).collect(),
    };
    let gap = r.chance(0.3);
    let mut strides = vec![0; n];
    let mut step = 1;
    for &d in order.iter().rev() {
        strides[d] = step;
        step *= lens[d] + usize::from(gap);
    }
    strides
}

/// The Rust descriptor of the same tensor (for the reference).
pub fn rust_desc(lens: &[usize], strides: &[usize]) -> TensorDesc {
    TensorDesc::with_strides(conflux::DataType::Float, lens, strides).expect("generated descriptors are valid")
}
