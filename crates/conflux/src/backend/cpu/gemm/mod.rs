//! A packed f32 GEMM, C = A·B with A m×k and B k×n, in the BLIS style: A is packed once into
//! MR-row micro-panels, B is packed per (K block, N block) into NR-column micro-panels, and a
//! register-blocked micro-kernel (`kernel.rs`) runs over them. Tasks are (M block, N block)
//! pairs run by rayon; each task accumulates its C block over all of K in a private f32
//! buffer and hands it to a `Sink` once, while it is still in cache — that is where
//! convolutions apply α/β and the fused epilogue.
//!
//! Operands are not matrices in memory but `Panels` implementations, so a convolution can
//! pack straight from its tensors (implicit im2col) in any layout and element type.

pub mod kernel;
pub mod kernel_a;
pub mod scratch;

pub use kernel::{available, best, Kernel, TileOut};
pub use scratch::{with_scratch, with_scratch_aligned, Slot};

use crate::backend::cpu::clamp::Clamp;
use rayon::prelude::*;
use std::ops::Range;

/// An operand that packs itself into micro-panels of width `w`: panel q covers the outer
/// indices `outer.start + q·w ..`, and holds, for each inner (K) index in `inner`, `w`
/// consecutive values; outer indices past `outer.end` are packed as zeros.
/// A is packed with outer = rows, B with outer = columns.
pub trait Panels: Sync {
    fn pack(&self, outer: Range<usize>, inner: Range<usize>, w: usize, dst: &mut [f32]);

    /// `Some((address, ld))` when the operand is a row-major f32 matrix in memory, element
    /// (outer o, inner p) at address + 4·(o·ld + p), that the kernels may read in place
    /// (used for A: full MR-row tiles skip packing).
    fn in_place(&self) -> Option<(usize, usize)> { None }
}

/// Receives each finished C block (the full K sum) as f32, row-major with row stride `ld`
/// (the sink may scribble on it). Blocks never overlap, and each is delivered exactly once.
pub trait Sink: Sync {
    fn store(&self, rows: Range<usize>, cols: Range<usize>, c: &mut [f32], ld: usize);

    /// `Some` when block (rows, cols) may instead be written tile by tile straight from the
    /// micro-kernel's registers (no round trip through the f32 block buffer and a second
    /// pass): an f32 row-major destination with an optional per-row bias and ReLU.
    fn direct(&self, _rows: Range<usize>, _cols: Range<usize>) -> Option<Direct> { None }
}

/// A C block's destination for register stores: element (rows.start + r, cols.start + j) at
/// `ptr + r·ld + j`, plus `bias[r]` when `bias` is not null, then `relu`'s clamp.
#[derive(Clone, Copy, Debug)]
pub struct Direct {
    pub ptr: *mut f32,
    pub ld: usize,
    pub bias: *const f32,
    pub relu: Clamp,
}

/// An operand given element by element: `f(outer, inner)`.
pub struct Elem<F>(pub F);

impl<F: Fn(usize, usize) -> f32 + Sync> Panels for Elem<F> {
    fn pack(&self, outer: Range<usize>, inner: Range<usize>, w: usize, dst: &mut [f32]) {
        let kb = inner.len();
        for (q, o0) in outer.clone().step_by(w).enumerate() {
            let panel = &mut dst[q * w * kb..(q + 1) * w * kb];
            let live = w.min(outer.end - o0);
            for (pi, p) in inner.clone().enumerate() {
                let row = &mut panel[pi * w..(pi + 1) * w];
                for (t, v) in row.iter_mut().enumerate() {
                    *v = if t < live { (self.0)(o0 + t, p) } else { 0.0 };
                }
            }
        }
    }
}

/// Cache blocking: K blocks of ≤ `kc` (a B micro-panel, kc×NR, stays in L1), tasks of `mc` rows
/// (their A block, mc×kc, stays in L2; B is packed once per task, so a large mc amortises the
/// packing) and `nc` columns (the task's f32 C block, mc×nc, stays in L2).
#[derive(Clone, Copy, Debug)]
pub struct Blocking {
    pub mc: usize,
    pub kc: usize,
    pub nc: usize,
}

fn round_up(v: usize, m: usize) -> usize { v.div_ceil(m) * m }

impl Blocking {
    /// Sizes for an m×n×k product on `threads` threads: near the cache-friendly maxima, but
    /// small enough that there are a few tasks per thread.
    pub fn choose(kern: &Kernel, m: usize, n: usize, k: usize, threads: usize) -> Blocking {
        let kblocks = k.div_ceil(256).max(1);
        let kc = k.div_ceil(kblocks).max(1);
        let mut mc = round_up(m.min(40 * kern.mr), kern.mr);
        let mut nc = round_up(n.min((128 * 1024 / mc).max(kern.nr)), kern.nr);
        let tasks = |mc: usize, nc: usize| m.div_ceil(mc) * n.div_ceil(nc);
        let want = 3 * threads;
        while tasks(mc, nc) < want && nc > 4 * kern.nr {
            nc = round_up(nc / 2, kern.nr);
        }
        while tasks(mc, nc) < want && mc > 2 * kern.mr {
            mc = round_up(mc / 2, kern.mr);
        }
        while tasks(mc, nc) < want && nc > kern.nr {
            nc = round_up(nc / 2, kern.nr);
        }
        // Even blocks: 512 filters in blocks of 480 left a 32-row block whose tasks re-read B
        // for a sliver of work while the other thread had the big ones. And a task count that
        // is a multiple of the threads where N allows: an odd count of even blocks on 2 threads
        // measured slower than uneven blocks (bench/results/2026-11-27-history-from-status.md,
        // gemm/mod.rs).
        let even = |len: usize, count: usize, unit: usize| round_up(len.div_ceil(count.max(1)), unit);
        let mblocks = m.div_ceil(mc);
        let mut nblocks = n.div_ceil(nc);
        while (mblocks * nblocks) % threads.max(1) != 0 && n.div_ceil(nblocks + 1) >= kern.nr {
            nblocks += 1;
        }
        Blocking { mc: even(m, mblocks, kern.mr), kc, nc: even(n, nblocks, kern.nr) }
    }
}

/// C = A·B with the best kernel, on the rayon pool.
pub fn gemm(m: usize, n: usize, k: usize, a: &dyn Panels, b: &dyn Panels, sink: &dyn Sink) {
    let kern = best();
    let blk = Blocking::choose(&kern, m, n, k, rayon::current_num_threads());
    gemm_with(&kern, blk, m, n, k, a, b, sink);
}

/// C = A·B with a given kernel and blocking.
#[allow(clippy::too_many_arguments)]
pub fn gemm_with(kern: &Kernel, blk: Blocking, m: usize, n: usize, k: usize, a: &dyn Panels, b: &dyn Panels, sink: &dyn Sink) {
    if m == 0 || n == 0 {
        return;
    }
    let (mr, nr) = (kern.mr, kern.nr);
    // Blocks are whole micro-tiles, whatever the caller asked for.
    let blk = Blocking { mc: round_up(blk.mc.max(1), mr), kc: blk.kc.max(1), nc: round_up(blk.nc.max(1), nr) };
    let mpad = round_up(m, mr);
    // K blocks; an empty K still makes one (empty) block so C is written as zeros.
    #[allow(clippy::single_range_in_vec_init)]
    let kblocks: Vec<Range<usize>> = if k == 0 { vec![0..0] } else { (0..k).step_by(blk.kc).map(|p| p..(p + blk.kc).min(k)).collect() };
    // A read in place: only the last, partial MR-row tile is packed.
    let direct = a.in_place();
    let packed_from = if direct.is_some() { m / mr * mr } else { 0 };
    let (mblocks, nblocks) = (m.div_ceil(blk.mc), n.div_ceil(blk.nc));
    let npad = round_up(n, nr);
    // B shared: when several M blocks would each pack the same B block (few output columns,
    // many filters: e.g. 7×7 layers), pack all of B once up front instead.
    let share_b = mblocks > 1 && npad * k.max(1) <= SHARED_B_MAX;
    with_scratch(Slot::PackA, mpad * k.max(1), |apack| {
        pack_all(a, m, mr, blk.mc, packed_from, &kblocks, apack);
        with_scratch(Slot::PackBAll, if share_b { npad * k.max(1) } else { 0 }, |bshared| {
            if share_b {
                pack_all(b, n, nr, blk.nc, 0, &kblocks, bshared);
            }
            let (apack, bshared) = (&*apack, &*bshared);
            (0..mblocks * nblocks).into_par_iter().for_each(|t| {
                // Consecutive tasks share an N block, so its B panels stay in the shared cache.
                let (jb, ib) = (t / mblocks, t % mblocks);
                let rows = ib * blk.mc..((ib + 1) * blk.mc).min(m);
                let cols = jb * blk.nc..((jb + 1) * blk.nc).min(n);
                let a_in = direct.map(|(addr, ld)| (addr, ld, packed_from));
                let b_src = if share_b { BSrc::Shared(bshared, npad) } else { BSrc::Pack(b) };
                task(kern, &kblocks, mpad, apack, a_in, b_src, sink, rows, cols);
            });
        });
    });
}

/// Largest B (f32 values, 32 MiB) packed once for all tasks; larger ones are packed per task.
const SHARED_B_MAX: usize = 8 << 20;

/// Pack operand `p` (outer length `len`, panels of width `w`) for every K block, in parallel
/// chunks of `chunk` outer indices, skipping outer indices below `from` (multiple of w).
/// Block `kb` lives at kb.start·round_up(len, w), as panels of w·kb.len() values.
fn pack_all(p: &dyn Panels, len: usize, w: usize, chunk: usize, from: usize, kblocks: &[Range<usize>], dst: &mut [f32]) {
    let lpad = round_up(len, w);
    let mut parts: Vec<(&Range<usize>, &mut [f32])> = Vec::with_capacity(kblocks.len());
    let mut rest = &mut dst[..];
    for kb in kblocks {
        let (head, tail) = rest.split_at_mut(lpad * kb.len());
        parts.push((kb, head));
        rest = tail;
    }
    parts.into_par_iter().for_each(|(kb, dst)| {
        dst.par_chunks_mut(chunk * kb.len().max(1)).enumerate().for_each(|(i, part)| {
            let o0 = i * chunk;
            let outer = o0.max(from)..(o0 + part.len() / kb.len().max(1)).min(len);
            if kb.is_empty() || outer.is_empty() {
                return;
            }
            p.pack(outer.clone(), kb.clone(), w, &mut part[(outer.start - o0) * kb.len()..]);
        });
    });
}

/// Where a task's B panels come from.
#[derive(Clone, Copy)]
enum BSrc<'a> {
    /// Packed by the task itself.
    Pack(&'a dyn Panels),
    /// Already packed by `pack_all` for the whole N range (padded length given).
    Shared(&'a [f32], usize),
}

/// One (M block, N block): loop over K blocks, pack B, run the micro-kernel, then sink.
/// `a_in` = (address, ld, first packed row) when A's full tiles are read in place.
#[allow(clippy::too_many_arguments)]
fn task(
    kern: &Kernel,
    kblocks: &[Range<usize>],
    mpad: usize,
    apack: &[f32],
    a_in: Option<(usize, usize, usize)>,
    b: BSrc,
    sink: &dyn Sink,
    rows: Range<usize>,
    cols: Range<usize>,
) {
    let (mr, nr) = (kern.mr, kern.nr);
    let (mp, np) = (round_up(rows.len(), mr), round_up(cols.len(), nr));
    let kmax = kblocks.iter().map(|r| r.len()).max().unwrap_or(0);
    let direct = sink.direct(rows.clone(), cols.clone());
    let last = kblocks.len() - 1;
    with_scratch(Slot::Tile, mp * np, |cbuf| {
        let own = if matches!(b, BSrc::Pack(_)) { np * kmax.max(1) } else { 0 };
        with_scratch(Slot::PackB, own, |bpack| {
            for (bi, kb) in kblocks.iter().enumerate() {
                let kc = kb.len();
                let bpack: &[f32] = match b {
                    BSrc::Pack(p) => {
                        if kc > 0 {
                            p.pack(cols.clone(), kb.clone(), nr, &mut bpack[..np * kc]);
                        }
                        &bpack[..]
                    }
                    BSrc::Shared(all, npad) => &all[kb.start * npad + cols.start * kc..],
                };
                let ablock = &apack[kb.start * mpad..];
                // Tiles column panel by column panel (the B panel stays in L1 while the A
                // panels stream), except when the last K block stores straight into the
                // destination: then row panel by row panel, so each destination row is written
                // front to back in consecutive tiles (one stream per row the prefetcher can
                // follow). Column-panel order there scattered 128-byte pieces over every row of
                // large outputs and measured much slower
                // (bench/results/2026-11-21-cpu-direct-store.md).
                let (tiles_m, tiles_n) = (mp / mr, np / nr);
                let rows_first = direct.is_some() && bi == last;
                for t in 0..tiles_m * tiles_n {
                    let (ir, jr) = if rows_first { (t / tiles_n, t % tiles_n) } else { (t % tiles_m, t / tiles_m) };
                    let row = rows.start + ir * mr;
                    let bp = bpack[jr * nr * kc..].as_ptr();
                    let cp = cbuf[ir * mr * np + jr * nr..].as_mut_ptr();
                    let ap = ablock[(row / mr) * mr * kc..].as_ptr();
                    // A read in place for this tile: (address, lda).
                    let in_place = a_in.filter(|&(_, _, packed_from)| row < packed_from).map(|(addr, ld, _)| ((addr as *const f32).wrapping_add(row * ld + kb.start), ld));
                    // The last K block of a sink that takes register stores: this tile's part.
                    let out = direct.filter(|_| bi == last).map(|d| TileOut {
                        ptr: d.ptr.wrapping_add(ir * mr * d.ld + jr * nr),
                        ld: d.ld,
                        bias: if d.bias.is_null() { d.bias } else { d.bias.wrapping_add(ir * mr) },
                        relu: d.relu,
                        rows: mr.min(rows.len() - ir * mr),
                        cols: nr.min(cols.len() - jr * nr),
                    });
                    // SAFETY: the A and B panels hold kc·mr and kc·nr values (in place: rows
                    // row..row + mr and columns kb lie inside the matrix, row + mr ≤ packed_from
                    // ≤ m); the C tile lies inside cbuf (mp×np, padded to whole tiles); `out`
                    // covers only the block's live rows and columns, which `direct` promised
                    // are writable.
                    unsafe {
                        match (out, kern.fe, in_place) {
                            (Some(o), Some((_, fae)), Some((a, ld))) => fae(kc, a, ld, bp, cp, np, bi > 0, &o),
                            (Some(o), Some((fe, _)), None) => fe(kc, ap, 0, bp, cp, np, bi > 0, &o),
                            (_, _, Some((a, ld))) => (kern.fa)(kc, a, ld, bp, cp, np, bi > 0),
                            (_, _, None) => (kern.f)(kc, ap, bp, cp, np, bi > 0),
                        }
                        // Kernels without register stores: the tile from the buffer, still in L1.
                        if let (Some(o), None) = (out, kern.fe) {
                            kernel::store_tile_out(cp, np, &o);
                        }
                    }
                }
            }
            if direct.is_none() {
                sink.store(rows.clone(), cols.clone(), cbuf, np);
            }
        })
    });
}

/// `dst.copy_from_slice(src)` for one panel row, inlined for the kernels' widths: a memmove
/// call per 128-byte row was a sizeable share of a large GEMM
/// (bench/results/2026-11-21-cpu-direct-store.md).
#[inline(always)]
pub fn copy_panel_row(dst: &mut [f32], src: &[f32]) {
    // Explicit 16-byte moves: LLVM turned the plain array assignment into a memcpy call in
    // some callers (Im2col::pack: 11% of 64-55-55-64 1×1 N=1).
    #[inline(always)]
    fn fixed<const W: usize>(dst: &mut [f32], src: &[f32]) {
        assert!(dst.len() == W && src.len() == W);
        #[cfg(target_arch = "x86_64")]
        for i in (0..W).step_by(4) {
            use std::arch::x86_64::{_mm_loadu_ps, _mm_storeu_ps};
            // SAFETY: i + 4 <= W = both lengths (W is a multiple of 4); SSE is baseline x86_64.
            unsafe { _mm_storeu_ps(dst.as_mut_ptr().add(i), _mm_loadu_ps(src.as_ptr().add(i))) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        dst.copy_from_slice(src);
    }
    match dst.len() {
        32 => fixed::<32>(dst, src),
        16 => fixed::<16>(dst, src),
        8 => fixed::<8>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

/// A row-major f32 matrix view for the simple cases (tests, col buffers).
#[derive(Clone, Copy)]
pub struct Dense<'a> {
    pub data: &'a [f32],
    /// Strides of (outer, inner): a row-major A is (ld, 1); a row-major B is (1, ld).
    pub outer_stride: usize,
    pub inner_stride: usize,
}

impl Panels for Dense<'_> {
    fn pack(&self, outer: Range<usize>, inner: Range<usize>, w: usize, dst: &mut [f32]) {
        let kb = inner.len();
        for (q, o0) in outer.clone().step_by(w).enumerate() {
            let panel = &mut dst[q * w * kb..(q + 1) * w * kb];
            let live = w.min(outer.end - o0);
            for (pi, p) in inner.clone().enumerate() {
                let row = &mut panel[pi * w..(pi + 1) * w];
                if self.outer_stride == 1 && live == w {
                    // Contiguous run: the common B case (row-major col buffer).
                    let s = p * self.inner_stride + o0;
                    copy_panel_row(row, &self.data[s..s + w]);
                } else {
                    for (t, v) in row.iter_mut().enumerate() {
                        *v = if t < live { self.data[(o0 + t) * self.outer_stride + p * self.inner_stride] } else { 0.0 };
                    }
                }
            }
        }
    }

    fn in_place(&self) -> Option<(usize, usize)> {
        (self.inner_stride == 1).then_some((self.data.as_ptr() as usize, self.outer_stride))
    }
}

/// A sink writing into a row-major f32 matrix shared between tasks.
pub struct DenseSink {
    ptr: *mut f32,
    ld: usize,
    /// C += block instead of C = block.
    pub accumulate: bool,
}

// SAFETY: tasks write disjoint blocks.
unsafe impl Sync for DenseSink {}

impl DenseSink {
    /// # Safety
    /// `ptr` must address a row-major matrix with row stride `ld` covering every block stored,
    /// valid for the sink's lifetime.
    pub unsafe fn new(ptr: *mut f32, ld: usize, accumulate: bool) -> DenseSink { DenseSink { ptr, ld, accumulate } }
}

impl Sink for DenseSink {
    fn store(&self, rows: Range<usize>, cols: Range<usize>, c: &mut [f32], ld: usize) {
        for (ri, r) in rows.enumerate() {
            let src = &c[ri * ld..ri * ld + cols.len()];
            // SAFETY: see `new`; blocks are disjoint.
            let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r * self.ld + cols.start), cols.len()) };
            if self.accumulate {
                dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
            } else {
                dst.copy_from_slice(src);
            }
        }
    }

    fn direct(&self, rows: Range<usize>, cols: Range<usize>) -> Option<Direct> {
        // SAFETY (pointer arithmetic): see `new`.
        (!self.accumulate).then(|| Direct { ptr: unsafe { self.ptr.add(rows.start * self.ld + cols.start) }, ld: self.ld, bias: std::ptr::null(), relu: Clamp::NONE })
    }
}

/// C = A·B for row-major slices (a: m×k, b: k×n, c: m×n) — the plain entry point.
pub fn sgemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    sgemm_with(&best(), None, m, n, k, a, b, c)
}

/// `sgemm` with a chosen kernel and optional blocking (tests cover every kernel and edge).
#[allow(clippy::too_many_arguments)]
pub fn sgemm_with(kern: &Kernel, blk: Option<Blocking>, m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "sgemm: slices too short");
    let blk = blk.unwrap_or_else(|| Blocking::choose(kern, m, n, k, rayon::current_num_threads()));
    let av = Dense { data: a, outer_stride: k, inner_stride: 1 };
    let bv = Dense { data: b, outer_stride: 1, inner_stride: n };
    // SAFETY: c is m×n row-major and outlives the call.
    let sink = unsafe { DenseSink::new(c.as_mut_ptr(), n, false) };
    gemm_with(kern, blk, m, n, k, &av, &bv, &sink);
}
