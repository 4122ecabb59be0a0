//! The TMA kernel's tiles: the tuning space, the heuristic choice by the busiest SM's work,
//! and split-K for small grids.

use crate::problem::Geom;
use crate::solver::cuda::tensor_core::TcPrecision;

/// One point of the kernel's space: block tile (one consumer warpgroup per 64 pixel rows),
/// pipeline depth, and whether the output goes through a shared staging buffer (bulk stores
/// or whole 16-byte row stores) or straight from registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaTile {
    pub bm: usize,
    pub bn: usize,
    pub stages: usize,
    pub staged: bool,
    /// Two consumer warpgroups on alternate 64-row tiles, each with its own ring of `stages`
    /// buffers (bm = 64): one's epilogue runs under the other's multiplies.
    pub pingpong: bool,
    /// Bytes per pixel or channel row of a stage: 128, or 64 for half-row k-steps (set by
    /// the kernel plan from the problem, not part of the label).
    pub row: usize,
}

impl TmaTile {
    pub const fn new(bm: usize, bn: usize, stages: usize, staged: bool) -> TmaTile { TmaTile { bm, bn, stages, staged, pingpong: false, row: 128 } }
    /// Ping-pong tiles of 64 × bn, `stages` buffers per consumer warpgroup.
    pub const fn pingpong(bn: usize, stages: usize, staged: bool) -> TmaTile { TmaTile { bm: 64, bn, stages, staged, pingpong: true, row: 128 } }
    fn consumers(&self) -> usize { if self.pingpong { 2 } else { self.bm / 64 } }
    fn rings(&self) -> usize { if self.pingpong { 2 } else { 1 } }
    /// Consumers plus the producer warpgroup.
    pub fn threads(&self) -> usize { (self.consumers() + 1) * 128 }
    /// Pipeline buffers (an x tile and one or two w tiles per stage), the staging buffer
    /// (results of the precision's element size), two barriers per stage, split-K's four
    /// flag words, 1 KiB to align the base.
    pub fn smem_bytes(&self, prec: TcPrecision) -> usize {
        let (stage, buffers) = ((self.bm + self.bn * prec.b_tiles()) * self.row, self.rings() * self.stages);
        buffers * stage + if self.staged { self.consumers() * 64 * self.bn * prec.stage_elem() } else { 0 } + 16 * buffers + 16 + 1024
    }
    /// Blocks per SM that shared memory and registers (accumulators plus about 48; Tf32x3
    /// also holds a per-stage partial and split A fragments, a split-K reduction a second set
    /// of sums) allow: with short reductions the epilogue dominates and wants more warps per SM.
    pub fn min_blocks(&self, prec: TcPrecision, split_k: bool) -> usize {
        let by_smem = 228 * 1024 / (self.smem_bytes(prec) + 1024);
        let sums = if split_k { self.bn } else { self.bn / 2 };
        let regs = if prec == TcPrecision::Tf32x3 { self.bn + 64 } else { sums + 48 };
        let by_regs = 65536 / (self.threads() * regs);
        by_smem.min(by_regs).clamp(1, 2)
    }
    /// The same tile with no more stages than `ksteps` k-steps per tile need to keep the
    /// next tile's first loads in flight (fewer stages leave room for another block), and no
    /// more than fit in a block's 227 KiB (Tf32x3 stages hold two w tiles).
    pub fn fitted(&self, ksteps: usize, prec: TcPrecision) -> TmaTile {
        let mut t = TmaTile { stages: self.stages.min(ksteps + 1).max(2), ..*self };
        while t.stages > 2 && t.smem_bytes(prec) > SMEM_LIMIT {
            t.stages -= 1;
        }
        t
    }
    /// The same tile over half-row k-steps (64-byte rows): twice the stages, so that as many
    /// channels are in flight, within the shared memory `fitted` allows.
    pub fn half_rows(&self) -> TmaTile { TmaTile { row: 64, stages: 2 * self.stages, ..*self } }
    pub fn label(&self) -> String {
        format!("tma{}{}x{}s{}{}", if self.pingpong { "pp" } else { "" }, self.bm, self.bn, self.stages, if self.staged { "" } else { "d" })
    }
    pub fn parse(s: &str) -> Option<TmaTile> { TMA_CONFIGS.iter().copied().find(|c| c.label() == s) }
}

/// Dynamic shared memory one block may use (227 KiB on sm_90).
pub(super) const SMEM_LIMIT: usize = 227 * 1024;

/// The tuning space; every entry fits the 227 KiB of shared memory a block may use with
/// 16-bit or TF32 data (`fitted` trims stages for Tf32x3).
pub const TMA_CONFIGS: &[TmaTile] = &[
    TmaTile::new(128, 128, 4, true),
    TmaTile::new(128, 128, 5, true),
    TmaTile::new(128, 128, 4, false),
    TmaTile::new(128, 128, 6, false),
    TmaTile::new(128, 64, 4, true),
    TmaTile::new(128, 64, 6, true),
    TmaTile::new(128, 64, 4, false),
    TmaTile::new(256, 128, 3, true),
    TmaTile::new(256, 64, 4, true),
    TmaTile::new(64, 128, 3, true),
    TmaTile::new(64, 128, 4, false),
    TmaTile::pingpong(128, 4, true),
    TmaTile::pingpong(64, 4, true),
];

/// Heuristic choice, fitted to the tile sweep on the ResNet-50 layers (H200, N = 64, f16;
/// bench/results/2026-11-21-h200-cba-tma.md; within 10% of the best tile on all 13): 256 × 64
/// for layers of at most 64 channels and for layers whose output per pixel is at least twice
/// their reduction (the epilogue and its stores dominate: more consumer warps, narrow tiles);
/// else 128 × 128 with 4 stages. Both stage the output for bulk stores. TF32 (f32 data) walks
/// twice the k-steps of half the channels: the 128 × 128 tile keeps 5 stages in flight there
/// (sweep in bench/results/2026-11-21-h200-tf32.md: within 4% of the best on 13 of 13).
/// Strict f32 (Tf32x3): sweep in bench/results/2026-11-21-h200-f32-split.md.
///
/// 16-bit data then weighs that tile against narrower ones by the work of the busiest SM
/// (`wave_cost`): small images and channel counts just past a tile's width leave a second,
/// nearly empty wave of 128 × 128 tiles (Inception's 17 × 17 layers ran at half speed).
pub fn tma_heuristic(g: &Geom, prec: TcPrecision, sms: usize) -> TmaTile {
    let narrow = g.kg() <= 64;
    let output_heavy = g.kg() >= 2 * g.cg() * g.filter_size();
    if prec == TcPrecision::Tf32x3 {
        // Three products per product make the main loop dominant: 128 × 128 with its results
        // stored from registers, except where the epilogue still dominates.
        return match (narrow, output_heavy) {
            (true, _) => TmaTile::new(256, 64, 4, true),
            (false, true) => TmaTile::new(128, 128, 4, true),
            (false, false) => TmaTile::new(128, 128, 4, false),
        };
    }
    let base = if narrow || output_heavy {
        TmaTile::new(256, 64, 4, true)
    } else if prec == TcPrecision::Tf32 {
        TmaTile::new(128, 128, 5, true)
    } else {
        TmaTile::new(128, 128, 4, true)
    };
    if !prec.narrow() {
        return base;
    }
    // The narrower tiles multiply less efficiently per SM (more loads per product): they win
    // only where the base tile's last wave wastes more than that (sweep of 40 zoo layers at
    // N = 32 and 1: bench/results/2026-11-28-h200-tma-waves.md).
    let candidates = [(base, 1.0), (TmaTile::new(256, 64, 4, true), 1.2), (TmaTile::new(128, 64, 6, true), 1.3)];
    let cost = |(t, penalty): &(TmaTile, f64)| wave_cost(g, t, sms) as f64 * penalty;
    candidates.iter().min_by(|a, b| cost(a).total_cmp(&cost(b))).map_or(base, |c| c.0)
}

/// Split-K for grids far smaller than the GPU (batch 1, small images) with long reductions:
/// enough splits of each output tile's k-steps to give every SM a block, at least four
/// k-steps per split (the copy pipeline needs a few in flight), at most 16. Reductions under
/// 16 k-steps stay whole: there the launch, the counters' zeroing and the epilogue cost more
/// than the split saves (bench/results/2026-11-28-h200-tma-waves.md).
pub fn tma_splits(tiles: usize, ksteps: usize, sms: usize) -> usize {
    if 2 * tiles > sms || ksteps < 16 {
        return 1;
    }
    (sms / tiles.max(1)).min(ksteps / 4).clamp(1, 16)
}

/// Products the busiest SM computes per k-step with tile `t`: output tiles are dealt round
/// the SMs, so an SM runs ⌈tiles / SMs⌉ of them.
fn wave_cost(g: &Geom, t: &TmaTile, sms: usize) -> usize {
    let tiles = (g.n * g.output_size()).div_ceil(t.bm) * g.kg().div_ceil(t.bn) * g.groups;
    tiles.div_ceil(sms.max(1)) * t.bm * t.bn
}

