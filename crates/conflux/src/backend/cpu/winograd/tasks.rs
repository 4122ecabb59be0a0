//! The tasks of the Winograd driver: how tile and filter panels are blocked over threads, and
//! each task's GEMMs M_ξ = V_ξ·U_ξ followed by the output transform while M is in cache.

use super::*;

/// Materialized U above this size (bytes) is transformed inside the tasks instead.
pub(super) const FUSE_ABOVE_BYTES: usize = 64 << 20;
/// With at most this many tile blocks each task transforms its own filters (the transform
/// done twice) rather than reading a U written by either core, which measured faster with
/// two tile blocks and made no difference with one or five
/// (bench/results/2026-11-25-cpu-constant-weights.md).
pub(super) const FUSE_UP_TO_TILE_BLOCKS: usize = 2;
/// Channels per GEMM step when the tasks transform the filters themselves.
pub(super) const FUSED_CHUNK: usize = 64;

/// Task blocking: tile panels × filter panels per task.
pub(super) struct Blocks {
    pub(super) kb: usize,
    pub(super) tblocks: usize,
    pub(super) kblocks: usize,
    /// One task per tile block, transforming its tile panels' input itself into a buffer of
    /// its thread and then running every filter block over it: V is written and read in the
    /// core's L2. A separate input phase wrote all of V to lines that had left L2 since the
    /// last call, and those store misses were a large share of the layer
    /// (bench/results/2026-11-25-cpu-session17.md).
    pub(super) input_in_tasks: bool,
}

/// Most bytes of V one task's tile block, and of U per group, when the tasks transform their
/// own input (`Blocks::input_in_tasks`): V stays in the core's L2 across the filter blocks,
/// and every task reads all of U, from L2. (With U streaming from memory, the smaller tile
/// blocks read it more often and measured slower: bench/results/2026-11-25-cpu-session17.md.)
pub(super) const INPUT_IN_TASK_BYTES: usize = 1 << 20;

impl Blocks {
    pub(super) fn choose(cx: &Ctx) -> Blocks {
        let (mr, nr) = (cx.kern.mr, cx.kern.nr);
        let (tpanels, kpanels) = (cx.tpad / mr, cx.kpad / nr);
        let want = 3 * rayon::current_num_threads();
        // Most tile and filter panels per task (48 tiles, 64 filters).
        let (tb_most, kb_most) = (tpanels.min((48 / mr).max(1)), kpanels.min((64 / nr).max(1)));
        // Enough tile blocks for every thread, each block's V in L2.
        let panel_bytes = 4 * mr * cx.cg * cx.xi;
        let tb_own = tpanels.div_ceil(want.div_ceil(cx.g.groups)).min(tb_most);
        let u_bytes = 4 * cx.kpad * cx.cg * cx.xi;
        if cx.g.groups * tpanels.div_ceil(tb_own) >= want && tb_own * panel_bytes <= INPUT_IN_TASK_BYTES && u_bytes <= INPUT_IN_TASK_BYTES {
            return Blocks { kb: kb_most, tblocks: tpanels.div_ceil(tb_own), kblocks: kpanels.div_ceil(kb_most), input_in_tasks: true };
        }
        let (mut tb, mut kb) = (tb_most, kb_most);
        let tasks = |tb: usize, kb: usize| cx.g.groups * tpanels.div_ceil(tb) * kpanels.div_ceil(kb);
        // Narrower filter blocks first: every extra tile block repeats the filter transform
        // when the tasks do it themselves.
        while tasks(tb, kb) < want && kb > 1 {
            kb -= 1;
        }
        while tasks(tb, kb) < want && tb > 1 {
            tb -= 1;
        }
        Blocks { kb, tblocks: tpanels.div_ceil(tb), kblocks: kpanels.div_ceil(kb), input_in_tasks: false }
    }

    /// Tile panels of tile block `ti`: the blocks differ by at most one panel. A last block of
    /// one partial panel streamed every filter panel again for a few rows (49 tiles = 4 + 1
    /// panels: that block took 7% of 128-28-28-128 at N=1; 3 + 2 is the same block count).
    fn tile_panels(&self, ti: usize, tpanels: usize) -> Range<usize> {
        crate::backend::cpu::even_part(tpanels, self.tblocks, ti)
    }
}


/// Phase 4: (group, tile block, filter block) tasks, or (group, tile block) tasks that first
/// transform their own input (`Blocks::input_in_tasks`). `u` is the materialized U, or None
/// when each task transforms its filters per channel chunk.
pub(super) fn gemm_and_output(cx: &Ctx, blk: &Blocks, io: &Io, u: Option<&[f32]>) {
    let (tblocks, kblocks) = (blk.tblocks, blk.kblocks);
    if blk.input_in_tasks {
        let tpanels = cx.tpad / cx.kern.mr;
        (0..cx.g.groups * tblocks).into_par_iter().for_each(|i| {
            let (group, ti) = (i / tblocks, i % tblocks);
            let tps = blk.tile_panels(ti, tpanels);
            let panel = cx.kern.mr * cx.cg;
            let vx = slab(tps.len() * panel);
            // In this thread's own buffer, whose lines its previous tasks left in L2.
            with_scratch(Slot::TaskInput, cx.xi * vx, |v| {
                let vp = Shared(v.as_mut_ptr());
                for (j, tp) in tps.clone().enumerate() {
                    input_panel_to(cx, io.planes, group, tp, 0, cx.cg, Shared(vp.0.wrapping_add(j * panel)), vx);
                }
                let view = VView { base: vp.0, vx, tp0: tps.start };
                for ki in 0..kblocks {
                    gemm_task(cx, blk, io, view, u, group, ti, ki);
                }
            });
        });
    } else {
        (0..cx.g.groups * tblocks * kblocks).into_par_iter().for_each(|i| {
            let group = i / (tblocks * kblocks);
            let view = VView { base: io.v.0.wrapping_add(group * io.vlen), vx: cx.vx, tp0: 0 };
            gemm_task(cx, blk, io, view, u, group, (i / kblocks) % tblocks, i % kblocks);
        });
    }
}

/// Where a task finds V: tile panel tp, channel c at base + ξ·vx + (tp − tp0)·mr·cg + c·mr.
#[derive(Clone, Copy)]
pub(super) struct VView {
    base: *mut f32,
    vx: usize,
    tp0: usize,
}

/// What the phases share: the padded planes, V, the per-group lengths of V and U, y.
pub(super) struct Io<'a> {
    pub(super) planes: &'a [f32],
    pub(super) v: Shared,
    pub(super) vlen: usize,
    pub(super) ulen: usize,
    pub(super) out: &'a OutTensor<'a>,
}

/// Tile block ti × filter block ki of one group: the GEMMs over its V rows (all written by
/// now) and the output transform.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_task(cx: &Ctx, blk: &Blocks, io: &Io, view: VView, u: Option<&[f32]>, group: usize, ti: usize, ki: usize) {
    let (mr, nr, cg) = (cx.kern.mr, cx.kern.nr, cx.cg);
    let (tpanels, kpanels) = (cx.tpad / mr, cx.kpad / nr);
    let kb = blk.kb;
    let (ulen, out) = (io.ulen, io.out);
    let chunk = if u.is_some() { cg } else { FUSED_CHUNK };
    // The partial last tile panel runs a kernel of its own height (AVX-512 12×32 only).
    let rows_kernel = cx.fast && (mr, nr) == (12, 32);
    let tps = blk.tile_panels(ti, tpanels);
    let kps = ki * kb..((ki + 1) * kb).min(kpanels);
    let (rows, cols) = (tps.len() * mr, kps.len() * nr);
    let ms = slab(rows * cols);
    with_scratch(Slot::Task, cx.xi * ms, |m| {
        with_scratch(Slot::PackB, if u.is_some() { 0 } else { cx.xi * slab(cols * chunk.min(cg)) }, |ul| {
            for c0 in (0..cg).step_by(chunk) {
                let cl = chunk.min(cg - c0);
                if u.is_none() {
                    for (kj, kp) in kps.clone().enumerate() {
                        let dst = Shared(ul[kj * nr * cl..].as_mut_ptr());
                        filter_panel(cx, group, kp, c0, c0 + cl, dst, slab(cols * cl));
                    }
                }
                for xi in 0..cx.xi {
                    // SAFETY: inside V; these rows were written before this task reads
                    // them, and nothing writes them while it runs.
                    let vx = unsafe { std::slice::from_raw_parts(view.base.add(xi * view.vx + c0 * mr), (tps.end - view.tp0) * mr * cg - c0 * mr) };
                    let mx = &mut m[xi * ms..];
                    for (kj, kp) in kps.clone().enumerate() {
                        let bp = match u {
                            Some(u) => u[group * ulen + xi * cx.ux + kp * nr * cg + c0 * nr..].as_ptr(),
                            None => ul[xi * slab(cols * cl) + kj * nr * cl..].as_ptr(),
                        };
                        for (tj, tp) in tps.clone().enumerate() {
                            let ap = vx[(tp - view.tp0) * mr * cg..].as_ptr();
                            let cp = mx[tj * mr * cols + kj * nr..].as_mut_ptr();
                            let live = mr.min(cx.tiles - tp * mr);
                            #[cfg(target_arch = "x86_64")]
                            if live < mr && rows_kernel {
                                // SAFETY: as below, for the first `live` rows only.
                                unsafe { crate::backend::cpu::x86::winograd::gemm_rows(live, cl, ap, bp, cp, cols, c0 > 0, tj == 0) };
                                continue;
                            }
                            // The first tile panel streams this U panel in (`Kernel::fb`).
                            let f = if tj == 0 { cx.kern.fb } else { cx.kern.f };
                            // SAFETY: panels of cl·mr and cl·nr values; the mr×nr tile lies in m.
                            unsafe { f(cl, ap, bp, cp, cols, c0 > 0) };
                        }
                    }
                }
            }
        });
        let t0 = tps.start * mr;
        let k0 = kps.start * nr;
        let tlive = rows.min(cx.tiles - t0);
        let klive = cols.min(cx.kg - k0);
        write_block(cx, out, m, ms, cols, group, t0, tlive, k0, klive);
    });
}
