//! Per-thread scratch buffers, reused across calls: a fresh multi-megabyte allocation per
//! convolution costs page faults comparable to the convolution itself.

use std::cell::{Cell, RefCell};

/// Named slots, so nested users on one thread never share a buffer.
#[derive(Clone, Copy)]
pub enum Slot {
    PackA = 0,
    PackB = 1,
    Tile = 2,
    /// Whole-problem buffers of the convolution drivers (im2col, col2im, Winograd).
    Conv = 3,
    /// Per-task buffers of the convolution drivers (padded planes, accumulators).
    Task = 4,
    Task2 = 5,
    /// B packed once for all tasks of a GEMM (on the calling thread).
    PackBAll = 6,
    /// A task's own transformed input (the Winograd driver's `Blocks::input_in_tasks`).
    TaskInput = 7,
    /// The fusion API's intermediates on the calling thread (a two-chain plan's t, merged
    /// horizontal branches' filters).
    Fusion = 8,
    /// A solver's packed copy of its input, held on the calling thread while an inner solver
    /// runs on it (the subsample 1×1 solver).
    Packed = 9,
}

thread_local! {
    static SCRATCH: [RefCell<Vec<f32>>; 10] = Default::default();
    /// Consecutive uses of each slot that needed under a quarter of its buffer.
    static SMALL_USES: [Cell<u32>; 10] = Default::default();
}

/// A buffer above this many f32 (64 MiB) is given back once `SHRINK_AFTER` consecutive uses
/// needed under a quarter of it: one huge layer must not pin its scratch for the thread's life,
/// while a large layer that comes back every few calls keeps it.
const LARGE: usize = 16 << 20;
const SHRINK_AFTER: u32 = 16;

/// Run `f` with `len` f32 of scratch (contents unspecified). If the slot is busy on this
/// thread (re-entrant use), a temporary buffer is used instead.
pub fn with_scratch<R>(slot: Slot, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with(|s| match s[slot as usize].try_borrow_mut() {
        Ok(mut v) => {
            let small = SMALL_USES.with(|c| {
                let c = &c[slot as usize];
                c.set(if v.len() > LARGE && len < v.len() / 4 { c.get() + 1 } else { 0 });
                c.get() >= SHRINK_AFTER
            });
            if small {
                *v = Vec::new();
                SMALL_USES.with(|c| c[slot as usize].set(0));
            }
            if v.len() < len {
                v.resize(len, 0.0);
            }
            f(&mut v[..len])
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

/// f32 held by `slot` on this thread (tests).
pub fn held(slot: Slot) -> usize { SCRATCH.with(|s| s[slot as usize].borrow().len()) }

/// `with_scratch` with the buffer starting on a cache line: transform panels are written and
/// read 64 bytes at a time, and a misaligned base split every access in two (it made the
/// Winograd filter transform's stores a large share of a layer:
/// bench/results/2026-11-27-history-from-status.md, gemm/scratch.rs).
pub fn with_scratch_aligned<R>(slot: Slot, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    with_scratch(slot, len + 16, |buf| {
        let skip = buf.as_ptr().align_offset(64).min(16);
        f(&mut buf[skip..skip + len])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_buffer_is_given_back_after_many_small_uses() {
        with_scratch(Slot::Task2, LARGE + 1, |b| b[0] = 1.0);
        assert!(held(Slot::Task2) > LARGE);
        for _ in 0..SHRINK_AFTER - 1 {
            with_scratch(Slot::Task2, 1000, |b| b[0] = 1.0);
        }
        assert!(held(Slot::Task2) > LARGE, "given back too early");
        // A large use in between resets the count.
        with_scratch(Slot::Task2, LARGE, |b| b[0] = 1.0);
        for _ in 0..SHRINK_AFTER - 1 {
            with_scratch(Slot::Task2, 1000, |b| b[0] = 1.0);
        }
        assert!(held(Slot::Task2) > LARGE, "a returning large layer lost its buffer");
        with_scratch(Slot::Task2, 1000, |b| b[0] = 1.0);
        assert!(held(Slot::Task2) < LARGE / 4, "still holding {} f32", held(Slot::Task2));
    }
}
