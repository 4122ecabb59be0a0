//! The caller's device allocator (`Handle::set_allocator`, MIOpen's `miopenSetAllocator`): the
//! GPU solvers take their per-execution scratch from it (here a strict-f32 forward convolution
//! on tensor cores, which splits w into scratch, and a channels-first one, whose layout
//! adapter copies x and w into scratch), give every block back, and fail cleanly when it has
//! no memory. The CPU backend never calls it.

mod support;

use conflux::conv::{api, Choice, Workspace};
use conflux::handle::{DeviceAllocator, DeviceKind};
use conflux::reference::{compare::tolerance, conv as rconv, fill::Fill};
use conflux::{ConvDesc, ConvMode, DataType, Handle, Status, TensorDesc};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use support::*;

/// Bump allocation out of one buffer the test owns, at addresses 4 bytes past a 256-byte
/// boundary; counts calls. `limit` 0: always refuses.
struct Arena {
    base: u64,
    limit: usize,
    next: Mutex<usize>,
    allocs: AtomicUsize,
    frees: AtomicUsize,
}

impl DeviceAllocator for Arena {
    fn allocate(&self, bytes: usize) -> Option<u64> {
        self.allocs.fetch_add(1, Ordering::SeqCst);
        let mut next = self.next.lock().unwrap();
        // Deliberately only 4-byte aligned: conflux must align its blocks itself.
        let at = next.next_multiple_of(256) + 4;
        if at + bytes > self.limit {
            return None;
        }
        *next = at + bytes;
        Some(self.base + at as u64)
    }
    fn free(&self, ptr: u64) {
        assert!(ptr >= self.base && ptr < self.base + self.limit as u64, "freed memory the arena never gave");
        self.frees.fetch_add(1, Ordering::SeqCst);
    }
}

fn arena(base: u64, limit: usize) -> Arc<Arena> {
    Arc::new(Arena { base, limit, next: Mutex::new(0), allocs: AtomicUsize::new(0), frees: AtomicUsize::new(0) })
}

/// f32 conv 3×3 pad 1 in `lay` with its inputs and reference output.
fn run_conv(h: &Handle, lay: Lay, seed: u64) -> Result<(), conflux::Error> {
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let x = desc(DataType::Float, &[2, 64, 9, 8], lay);
    let w = desc(DataType::Float, &[64, 64, 3, 3], lay);
    let y = conv.output_desc(&x, &w).unwrap();
    let (xd, wd) = (random(h, &x, Fill::Normal, seed), random(h, &w, Fill::Normal, seed + 1));
    let packed = TensorDesc::new(DataType::Float, y.lens()).unwrap();
    let mut want = vec![0.0; packed.element_space()];
    rconv::conv_forward(&conv, &x, &xd.host, &w, &wd.host, &packed, &mut want).unwrap();
    let yd = poisoned(h, &y);
    let ws = Workspace::default();
    match api::forward(h, &conv, &x, xd.ptr(), &w, wd.ptr(), &y, yd.ptr(), 1.0, 0.0, Choice::Auto, ws) {
        Ok(()) => {
            assert_close("conv with the caller's allocator", &logical(&y, &download(h, &yd)), &want, tolerance(DataType::Float));
            Ok(())
        }
        Err(e) => {
            // Nothing of the caller's was written: y still holds the poison.
            assert!(logical(&y, &download(h, &yd)).iter().all(|v| v.is_nan()), "y written by a failed convolution");
            Err(e)
        }
    }
}

device_tests!(scratch_comes_from_the_callers_allocator, |h: &Handle| {
    let mem = h.alloc(64 << 20).unwrap();
    let a = arena(mem.ptr().0, 64 << 20);
    h.set_allocator(Some(a.clone()));
    for (i, lay) in [Lay::ChannelsLast, Lay::Packed].into_iter().enumerate() {
        run_conv(h, lay, 10 + i as u64).unwrap();
    }
    h.synchronize().unwrap();
    let (allocs, frees) = (a.allocs.load(Ordering::SeqCst), a.frees.load(Ordering::SeqCst));
    if h.device_kind() == DeviceKind::Cuda {
        assert!(allocs >= 2, "scratch did not come from the allocator ({allocs} calls)");
    } else {
        assert_eq!(allocs, 0, "the CPU backend called a device allocator");
    }
    assert_eq!(allocs, frees, "every block given back");
    // None restores conflux's own pool: the arena sees no more calls.
    h.set_allocator(None);
    run_conv(h, Lay::ChannelsLast, 20).unwrap();
    assert_eq!(a.allocs.load(Ordering::SeqCst), allocs);
});

device_tests!(an_allocator_without_memory_fails_cleanly, |h: &Handle| {
    let a = arena(0, 0);
    h.set_allocator(Some(a.clone()));
    let r = run_conv(h, Lay::ChannelsLast, 30);
    if h.device_kind() == DeviceKind::Cuda && a.allocs.load(Ordering::SeqCst) > 0 {
        let e = r.unwrap_err();
        assert_eq!(e.status, Status::AllocFailed, "{e}");
        assert!(e.reason.contains("allocator"), "{e}");
    } else {
        r.unwrap();
    }
    assert_eq!(a.frees.load(Ordering::SeqCst), 0);
});
