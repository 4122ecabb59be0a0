//! Independent pieces of one operation side by side: the handle's stream forks onto the
//! device's side streams and joins back through events, so that launches too small to fill the
//! GPU (the phases of a strided backward-data: a few tiles and k-steps each) overlap instead of
//! each paying its own ramp and tail.
//!
//! A piece runs with this thread's launches redirected to its side stream
//! (`CudaDevice::on_stream`), so everything it queues — kernels, copies, stream-ordered scratch
//! — is ordered on that stream. Under stream capture the pieces run one after another on the
//! handle's stream: a side stream shared by the device's threads must not join another
//! thread's capture.

use super::driver::{driver_err, CudaDevice};
use crate::error::Result;
use cudarc::driver::{result as cu, sys};

/// Side streams a fork uses at most (pieces beyond them share streams round-robin).
pub const SIDE_STREAMS: usize = 3;

/// Run `pieces` in order of issue, the first on the handle's stream and the others each on a
/// side stream, all after the work queued before and before the work queued after.
pub fn fork_join(dev: &CudaDevice, pieces: Vec<Box<dyn FnOnce() -> Result<()> + '_>>) -> Result<()> {
    let main = dev.stream();
    // SAFETY: the handle's stream.
    let capture = unsafe { cu::stream::is_capturing(main) }.map_err(|e| driver_err("cuStreamIsCapturing", e))?;
    let sides = match dev.side_streams() {
        Ok(s) if pieces.len() > 1 && capture == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE => s,
        _ => return pieces.into_iter().try_for_each(|p| p()),
    };
    let wait = |stream: sys::CUstream, e: sys::CUevent| {
        // SAFETY: a live stream and an event recorded before this call.
        unsafe { cu::stream::wait_event(stream, e, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }.map_err(|e| driver_err("cuStreamWaitEvent", e))
    };
    let record = |e: sys::CUevent, stream: sys::CUstream| {
        // SAFETY: a live event and stream.
        unsafe { cu::event::record(e, stream) }.map_err(|e| driver_err("cuEventRecord", e))
    };
    let mut events = Events(dev, Vec::with_capacity(pieces.len()));
    let forked = dev.take_event()?;
    events.1.push(forked);
    record(forked, main)?;
    let used = (pieces.len() - 1).min(sides.len());
    for &s in &sides[..used] {
        wait(s as sys::CUstream, forked)?;
    }
    let mut result = Ok(());
    for (i, piece) in pieces.into_iter().enumerate() {
        let run = if i == 0 { piece() } else { dev.on_stream(sides[(i - 1) % used], piece) };
        if let Err(e) = run {
            result = Err(e);
            break;
        }
    }
    // Join every side stream used, whatever happened: the handle's stream must not run ahead
    // of work already queued on them.
    for &s in &sides[..used] {
        let done = dev.take_event()?;
        events.1.push(done);
        record(done, s as sys::CUstream)?;
        wait(main, done)?;
    }
    result
}

/// Events of one fork, back to the device's reuse list once their waits are queued.
struct Events<'a>(&'a CudaDevice, Vec<sys::CUevent>);

impl Drop for Events<'_> {
    fn drop(&mut self) { self.0.give_events(self.1.drain(..)) }
}
