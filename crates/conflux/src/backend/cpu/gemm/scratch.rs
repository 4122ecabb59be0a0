//! Per-thread scratch buffers, reused across calls: a fresh multi-megabyte allocation per
//! convolution costs page faults comparable to the convolution itself.

use std::cell::RefCell;

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
}

thread_local! {
    static SCRATCH: [RefCell<Vec<f32>>; 8] = Default::default();
}

/// Run `f` with `len` f32 of scratch (contents unspecified). If the slot is busy on this
/// thread (re-entrant use), a temporary buffer is used instead.
pub fn with_scratch<R>(slot: Slot, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with(|s| match s[slot as usize].try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < len {
                v.resize(len, 0.0);
            }
            f(&mut v[..len])
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

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
