//! Split-K tile counters that outlive one execution. The forward TMA kernel counts the splits
//! of each output tile as they finish; the split that finishes last adds the partial sums and
//! sets its counter back to zero. A counter block zeroed once is therefore zero again as soon
//! as the launch that used it has finished, and the next launch can take it without the memset
//! a fresh scratch block needs (at batch 1 that memset, and the gap it leaves before the
//! kernel, cost about a fifth of the layer: `bench/results/2026-11-29-h200-zoo-ncu.md`).
//!
//! A block is lent to one launch at a time, and the launch's stream first waits for the event
//! recorded after the block's previous launch: on the same stream that wait is already met,
//! so a host running many launches ahead reuses one block; on another stream (or a stream
//! destroyed and replaced) it orders the two launches instead of letting them share counters.
//! While the stream is being captured into a graph, or while every block is lent, `acquire`
//! gives nothing and the caller zeroes counters in its own scratch.

use super::driver::{driver_err, CudaDevice, DeviceMemory};
use crate::error::Result;
use cudarc::driver::{result as cu, sys};
use std::sync::Mutex;

/// Blocks one invoker keeps: one per stream running it at the same time, up to this many.
const MAX_BLOCKS: usize = 4;

struct Block {
    memory: DeviceMemory,
    /// Recorded on the stream after the block's last launch (never recorded: complete).
    done: sys::CUevent,
    /// The stream of that launch.
    stream: u64,
    lent: bool,
}

pub struct SplitCounters {
    bytes: usize,
    blocks: Mutex<Vec<Block>>,
}

// SAFETY: the events and device memory are plain driver handles, used under the mutex.
unsafe impl Send for SplitCounters {}
unsafe impl Sync for SplitCounters {}

/// A zeroed counter block lent to one launch: call `launched` once the launch is queued. Dropped
/// without that (the launch failed to queue and left the counters untouched), the block is free
/// again at once.
pub struct CounterLease<'a> {
    owner: &'a SplitCounters,
    index: usize,
    pub ptr: u64,
}

impl SplitCounters {
    pub fn new(bytes: usize) -> SplitCounters { SplitCounters { bytes, blocks: Mutex::new(Vec::new()) } }

    /// A block whose counters are all zero when work queued now on the device's stream runs,
    /// or None (stream capture, or every block lent).
    pub fn acquire(&self, dev: &CudaDevice) -> Result<Option<CounterLease<'_>>> {
        // SAFETY: the handle's stream.
        let capture = unsafe { cu::stream::is_capturing(dev.stream()) }.map_err(|e| driver_err("cuStreamIsCapturing", e))?;
        if capture != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            return Ok(None);
        }
        let mut blocks = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
        let stream = dev.stream_raw();
        // SAFETY: events created below and destroyed only on drop.
        let idle = |b: &Block| unsafe { cu::event::query(b.done) }.is_ok();
        // A block whose last launch has run, else the one this stream used last (its wait
        // is met in stream order), else a new block, else one in flight on another stream.
        let pick = blocks.iter().position(|b| !b.lent && idle(b)).or_else(|| blocks.iter().position(|b| !b.lent && b.stream == stream));
        let index = match pick {
            Some(i) => i,
            None if blocks.len() < MAX_BLOCKS => {
                let memory = dev.alloc(self.bytes)?;
                // Ordered on this stream, whatever stream the allocation's own zeroing ran on.
                dev.memset_async(memory.ptr(), self.bytes)?;
                let done = cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(|e| driver_err("cuEventCreate", e))?;
                blocks.push(Block { memory, done, stream, lent: false });
                blocks.len() - 1
            }
            None => match blocks.iter().position(|b| !b.lent) {
                Some(i) => i,
                None => return Ok(None),
            },
        };
        if !idle(&blocks[index]) {
            // SAFETY: the handle's stream and a valid event.
            unsafe { cu::stream::wait_event(dev.stream(), blocks[index].done, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }.map_err(|e| driver_err("cuStreamWaitEvent", e))?;
        }
        blocks[index].lent = true;
        Ok(Some(CounterLease { owner: self, index, ptr: blocks[index].memory.ptr() }))
    }
}

impl CounterLease<'_> {
    /// The launch using the block is queued: the block is free again when it has run.
    pub fn launched(&self, dev: &CudaDevice) -> Result<()> {
        let mut blocks = self.owner.blocks.lock().unwrap_or_else(|p| p.into_inner());
        let block = &mut blocks[self.index];
        block.stream = dev.stream_raw();
        // SAFETY: a valid event, recorded on the handle's stream.
        unsafe { cu::event::record(block.done, dev.stream()) }.map_err(|e| driver_err("cuEventRecord", e))
    }
}

impl Drop for CounterLease<'_> {
    fn drop(&mut self) { self.owner.blocks.lock().unwrap_or_else(|p| p.into_inner())[self.index].lent = false; }
}

impl Drop for SplitCounters {
    fn drop(&mut self) {
        for b in self.blocks.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            // SAFETY: created in `acquire`; the memory's own drop waits for pending work.
            unsafe {
                let _ = cu::event::destroy(b.done);
            }
        }
    }
}
