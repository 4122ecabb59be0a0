//! Transformed filters kept by an invoker whose caller promised constant weights
//! (`ConvDesc::weights_constant`): the transform runs on the first call with a filter address
//! and later calls with that address reuse it, as oneDNN users reuse weights reordered once.
//!
//! An invoker is shared by every caller of its problem (threads included), so the cache holds
//! the few most recent addresses rather than one.
//!
//! The promise is the contract, but allocators hand freed addresses out again: a framework
//! that frees one weight tensor and allocates another gets the same address with other values.
//! So each entry also keeps a sample of the filter's bytes (`SAMPLES` words spread over it),
//! compared on every call (a few hundred nanoseconds): a filter that differs at any sampled
//! word is transformed again. An edit that misses every sampled word is not seen.

use crate::problem::FusedProblem;
use std::sync::{Arc, Mutex};

/// Addresses kept per invoker: a plan alternating between a few weight sets (e.g. two models
/// sharing a shape) keeps all of them.
const ENTRIES: usize = 4;
/// f32 values per 64-byte cache line: transformed filters start on a line.
const LINE: usize = 16;
/// 4-byte words of the filter compared on each call.
const SAMPLES: usize = 64;

/// `SAMPLES` words spread evenly over `bytes` bytes at `src` (the last word included).
///
/// # Safety
/// `src` is readable for `bytes` bytes.
unsafe fn sample(src: *const u8, bytes: usize) -> Vec<u32> {
    let words = bytes / 4;
    if words == 0 {
        return (0..bytes).map(|i| *src.add(i) as u32).collect();
    }
    let mut v: Vec<u32> = (0..SAMPLES.min(words)).map(|i| (src.add(i * words / SAMPLES.min(words) * 4) as *const u32).read_unaligned()).collect();
    v.push((src.add(bytes - 4) as *const u32).read_unaligned());
    v
}

/// One transformed filter of 4-byte values (f32, or i32 for the int8 solvers' packed rows and
/// sums), 64-byte aligned.
pub struct Transformed<T = f32> {
    buf: Vec<T>,
    off: usize,
    len: usize,
}

impl<T: Copy + Default> Transformed<T> {
    fn new(len: usize) -> Transformed<T> {
        const { assert!(std::mem::size_of::<T>() == 4, "4-byte values: LINE of them fill a cache line") };
        let buf = vec![T::default(); len + LINE];
        let off = buf.as_ptr().align_offset(64).min(LINE);
        Transformed { buf, off, len }
    }

    pub fn as_slice(&self) -> &[T] { &self.buf[self.off..self.off + self.len] }

    fn as_mut_slice(&mut self) -> &mut [T] { &mut self.buf[self.off..self.off + self.len] }
}

/// `problem`'s filter at `w` transformed by `fill` (given `len` zeroed values): kept in `cache`
/// when there is one (the caller promised constant weights), else made for this call only.
///
/// # Safety
/// `w` addresses the filter `problem`'s descriptors describe.
pub unsafe fn transformed_filter<T: Copy + Default>(cache: Option<&WeightCache<T>>, problem: &FusedProblem, w: u64, len: usize, fill: impl FnOnce(&mut [T])) -> Arc<Transformed<T>> {
    match cache {
        Some(c) => c.filter(problem, w, len, fill),
        None => {
            let mut t = Transformed::new(len);
            fill(t.as_mut_slice());
            Arc::new(t)
        }
    }
}

struct Entry<T> {
    addr: usize,
    sample: Vec<u32>,
    t: Arc<Transformed<T>>,
}

/// Transformed filters by filter address, most recently used last.
pub struct WeightCache<T = f32> {
    entries: Mutex<Vec<Entry<T>>>,
}

impl<T> Default for WeightCache<T> {
    fn default() -> WeightCache<T> { WeightCache { entries: Mutex::new(Vec::new()) } }
}

impl<T: Copy + Default> WeightCache<T> {
    /// A cache for `problem`'s invoker when its descriptor promises constant weights, else
    /// None (every call transforms the filter).
    pub fn if_promised(problem: &FusedProblem) -> Option<WeightCache<T>> {
        problem.conv_problem().is_some_and(|c| c.conv.weights_constant()).then(WeightCache::default)
    }

    /// `get_or_make` for the filter tensor of `problem` at address `w`.
    ///
    /// # Safety
    /// `w` addresses the filter `problem`'s descriptors describe.
    pub unsafe fn filter(&self, problem: &FusedProblem, w: u64, len: usize, fill: impl FnOnce(&mut [T])) -> Arc<Transformed<T>> {
        let bytes = problem.conv_problem().map_or(0, |c| c.w.num_bytes());
        self.get_or_make(w as *const u8, bytes, len, fill)
    }

    /// The transformed filter of the `bytes` bytes at `w`, made by `fill` (given `len` zeroed
    /// values) on the first call with this address, or when the sampled words changed. Two
    /// threads meeting a new address may both transform it; one result is kept.
    ///
    /// # Safety
    /// `w` is readable for `bytes` bytes.
    pub unsafe fn get_or_make(&self, w: *const u8, bytes: usize, len: usize, fill: impl FnOnce(&mut [T])) -> Arc<Transformed<T>> {
        let (addr, now) = (w as usize, sample(w, bytes));
        if let Some(t) = self.lookup(addr, &now, len) {
            return t;
        }
        let mut t = Transformed::new(len);
        fill(t.as_mut_slice());
        let t = Arc::new(t);
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        e.retain(|x| x.addr != addr);
        if e.len() == ENTRIES {
            e.remove(0);
        }
        e.push(Entry { addr, sample: now, t: t.clone() });
        t
    }

    fn lookup(&self, addr: usize, sample: &[u32], len: usize) -> Option<Arc<Transformed<T>>> {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let i = e.iter().position(|x| x.addr == addr && x.t.len == len && x.sample == sample)?;
        let hit = e.remove(i);
        let t = hit.t.clone();
        e.push(hit);
        Some(t)
    }

    /// Addresses held (tests).
    pub fn len(&self) -> usize { self.entries.lock().unwrap_or_else(|p| p.into_inner()).len() }

    pub fn is_empty(&self) -> bool { self.len() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_by_address_and_keeps_the_most_recent() {
        let c = WeightCache::default();
        let filters: Vec<Vec<f32>> = (0..6).map(|i| vec![i as f32; 100]).collect();
        let mut made = 0;
        for addr in [1usize, 2, 1, 3, 4, 5, 1, 2] {
            let w = &filters[addr];
            // SAFETY: w holds 400 bytes.
            let t = unsafe {
                c.get_or_make(w.as_ptr() as *const u8, 400, 8, |d| {
                    made += 1;
                    d.fill(addr as f32);
                })
            };
            assert_eq!(t.as_slice(), &[addr as f32; 8]);
            assert_eq!(t.as_slice().as_ptr() as usize % 64, 0);
        }
        // 1, 2, (1 hit), 3, 4, 5 (evicts 2), (1 hit), 2 again (evicts 3).
        assert_eq!(made, 6);
        assert_eq!(c.len(), ENTRIES);
        // Another length at a known address is another transform (a different problem).
        // SAFETY: as above.
        let t = unsafe { c.get_or_make(filters[1].as_ptr() as *const u8, 400, 4, |d| d.fill(9.0)) };
        assert_eq!(t.as_slice(), &[9.0; 4]);
    }

    #[test]
    fn changed_values_at_a_known_address_are_transformed_again() {
        let c = WeightCache::default();
        for bytes in [2usize, 7, 400, 40000] {
            let mut w = vec![1u8; bytes];
            let get = |w: &[u8], v: f32| unsafe { c.get_or_make(w.as_ptr(), bytes, 1, |d| d[0] = v).as_slice()[0] };
            assert_eq!(get(&w, 1.0), 1.0);
            assert_eq!(get(&w, 2.0), 1.0, "{bytes} bytes: unchanged, kept");
            // The last byte is always sampled; so is the first.
            w[bytes - 1] = 5;
            assert_eq!(get(&w, 3.0), 3.0, "{bytes} bytes: last byte changed");
            w[0] = 5;
            assert_eq!(get(&w, 4.0), 4.0, "{bytes} bytes: first byte changed");
            w.iter_mut().for_each(|b| *b = 9);
            assert_eq!(get(&w, 5.0), 5.0, "{bytes} bytes: all changed");
        }
    }
}
