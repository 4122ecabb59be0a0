//! The dense fast path's iteration: tensors whose elements form contiguous rows — each (n, c)
//! plane when the spatial dims are packed (NCHW-like), or each image's pixels × channels when
//! channels and spatial dims are packed channels-last (NHWC-like) — are walked in chunks of
//! at most `CHUNK` consecutive elements, threaded over tasks of ≥ 32 KiB of traffic so small
//! tensors run on the caller's thread.

use crate::conv::shape5;
use crate::tensor::TensorDesc;
use rayon::prelude::*;

/// Elements per chunk: the f32 staging buffers (a few KiB) stay in L1.
pub const CHUNK: usize = 256;

/// Bytes of traffic per parallel task: below this, rayon's hand-off costs more than it saves.
const TASK_BYTES: usize = 32 << 10;

/// How the rows of a dense tensor map onto channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// One row per (n, c): S = D·H·W elements of channel c.
    Planar,
    /// One row per n: S pixels of C channels each; element e has channel e % C.
    ChannelsLast,
}

/// A dense arrangement shared by every tensor of an operation.
#[derive(Clone, Copy, Debug)]
pub struct Dense {
    pub rows: Rows,
    pub n: usize,
    pub c: usize,
    /// Spatial size D·H·W.
    pub s: usize,
    /// Element strides of N and C (C unused for channels-last).
    sn: usize,
    sc: usize,
}

/// One contiguous run of a row.
#[derive(Clone, Copy, Debug)]
pub struct Chunk {
    /// Element offset of the run's first element in every tensor of the operation.
    pub off: usize,
    pub len: usize,
    /// Planar: the run's channel. Channels-last: unused (0).
    pub c: usize,
    /// Index of the first element within its row (planar: spatial index; channels-last:
    /// pixel·C + channel).
    pub e0: usize,
}

/// True when every dim longer than 1, taken innermost first in `order`, has the stride of a
/// packed run (dims of length 1 may have any stride).
fn packed(lens: &[usize; 5], strides: &[usize; 5], order: &[usize]) -> bool {
    let mut acc = 1;
    for &d in order {
        if lens[d] > 1 && strides[d] != acc {
            return false;
        }
        acc *= lens[d];
    }
    true
}

impl Dense {
    /// The dense arrangement of `t`, if it has one.
    pub fn of(t: &TensorDesc) -> Option<Dense> {
        let ([n, c], [d, h, w], s) = shape5(t);
        let lens = [n, c, d, h, w];
        let rows = if packed(&lens, &s, &[1, 4, 3, 2]) {
            Rows::ChannelsLast
        } else if packed(&lens, &s, &[4, 3, 2]) {
            Rows::Planar
        } else {
            return None;
        };
        Some(Dense { rows, n, c, s: d * h * w, sn: s[0], sc: s[1] })
    }

    /// `of(a)` when every tensor in `others` has a's lengths and, on every dim longer than 1,
    /// a's strides (so one element offset addresses all of them).
    pub fn shared(a: &TensorDesc, others: &[&TensorDesc]) -> Option<Dense> {
        let (anc, asp, as_) = shape5(a);
        let lens = [anc[0], anc[1], asp[0], asp[1], asp[2]];
        for b in others {
            let (bnc, bsp, bs) = shape5(b);
            if [bnc[0], bnc[1], bsp[0], bsp[1], bsp[2]] != lens || (0..5).any(|i| lens[i] > 1 && as_[i] != bs[i]) {
                return None;
            }
        }
        Dense::of(a)
    }

    fn row_len(&self) -> usize {
        match self.rows {
            Rows::Planar => self.s,
            Rows::ChannelsLast => self.s * self.c,
        }
    }

    fn row_count(&self) -> usize {
        match self.rows {
            Rows::Planar => self.n * self.c,
            Rows::ChannelsLast => self.n,
        }
    }

    /// Call `f` on every chunk exactly once, chunks of one task in memory order. `bytes_per_elem`
    /// (bytes read + written per element) sizes the tasks.
    pub fn for_each_chunk(&self, bytes_per_elem: usize, f: impl Fn(Chunk) + Sync) {
        let (row_len, total) = (self.row_len(), self.row_len() * self.row_count());
        let task = (TASK_BYTES / bytes_per_elem.max(1)).next_multiple_of(CHUNK);
        let tasks = total.div_ceil(task);
        let run = |t: usize| {
            let (mut i, end) = (t * task, ((t + 1) * task).min(total));
            while i < end {
                let (r, e0) = (i / row_len, i % row_len);
                let len = CHUNK.min(row_len - e0).min(end - i);
                let (base, c) = match self.rows {
                    Rows::Planar => ((r / self.c) * self.sn + (r % self.c) * self.sc, r % self.c),
                    Rows::ChannelsLast => (r * self.sn, 0),
                };
                f(Chunk { off: base + e0, len, c, e0 });
                i += len;
            }
        };
        if tasks <= 1 {
            (0..tasks).for_each(run);
        } else {
            (0..tasks).into_par_iter().for_each(run);
        }
    }
}
