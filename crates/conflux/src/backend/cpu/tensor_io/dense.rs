//! The dense fast path's iteration: tensors whose elements form contiguous rows — each (n, c)
//! plane when the spatial dims are packed (NCHW-like), or each image's pixels × channels when
//! channels and spatial dims are packed channels-last (NHWC-like) — are walked in chunks of
//! at most `CHUNK` consecutive elements, threaded over tasks of ≥ 32 KiB of traffic so small
//! tensors run on the caller's thread.

use crate::problem::shape5;
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

    /// Call `f` on every chunk exactly once, chunks of one task in memory order, with `B`
    /// staging buffers of `CHUNK` f32 (zeroed once per task, not per chunk: for short rows the
    /// memset cost as much as the work). `bytes_per_elem` (read + written) sizes the tasks.
    pub fn for_each_chunk<const B: usize, F: Fn(Chunk, &mut [[f32; CHUNK]; B]) + Sync>(&self, bytes_per_elem: usize, f: F) {
        let total = self.row_len() * self.row_count();
        let task = (TASK_BYTES / bytes_per_elem.max(1)).next_multiple_of(CHUNK);
        let tasks = total.div_ceil(task);
        let run = |t: usize| self.task((t * task, ((t + 1) * task).min(total)), &f);
        if tasks <= 1 {
            (0..tasks).for_each(run);
        } else {
            (0..tasks).into_par_iter().for_each(run);
        }
    }

    /// The chunks of elements `i..end` (rows one after another).
    fn task<const B: usize, F: Fn(Chunk, &mut [[f32; CHUNK]; B])>(&self, (mut i, end): (usize, usize), f: &F) {
        let row_len = self.row_len();
        let mut bufs = [[0f32; CHUNK]; B];
        while i < end {
            let (r, e0) = (i / row_len, i % row_len);
            let len = CHUNK.min(row_len - e0).min(end - i);
            let (base, c) = match self.rows {
                Rows::Planar => ((r / self.c) * self.sn + (r % self.c) * self.sc, r % self.c),
                Rows::ChannelsLast => (r * self.sn, 0),
            };
            f(Chunk { off: base + e0, len, c, e0 }, &mut bufs);
            i += len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DataType, Layout};
    use std::sync::Mutex;

    fn desc(layout: Layout, lens: &[usize]) -> TensorDesc {
        TensorDesc::with_layout(DataType::Float, layout, lens).unwrap()
    }

    #[test]
    fn arrangements() {
        let of = |d: &TensorDesc| Dense::of(d).map(|d| d.rows);
        assert_eq!(of(&desc(Layout::NCHW, &[2, 3, 4, 5])), Some(Rows::Planar));
        assert_eq!(of(&desc(Layout::NHWC, &[2, 3, 4, 5])), Some(Rows::ChannelsLast));
        assert_eq!(of(&desc(Layout::NDHWC, &[2, 3, 2, 4, 5])), Some(Rows::ChannelsLast));
        // Rows padded (H stride 6 for W = 5): no dense arrangement.
        let gapped = TensorDesc::with_strides(DataType::Float, &[2, 3, 4, 5], &[72, 24, 6, 1]).unwrap();
        assert!(Dense::of(&gapped).is_none());
        // Planes apart (C stride 30 > H·W) are still planar rows.
        let apart = TensorDesc::with_strides(DataType::Float, &[2, 3, 4, 5], &[90, 30, 5, 1]).unwrap();
        assert_eq!(of(&apart), Some(Rows::Planar));
        // Different arrangements are never shared.
        assert!(Dense::shared(&desc(Layout::NCHW, &[2, 3, 4, 5]), &[&desc(Layout::NHWC, &[2, 3, 4, 5])]).is_none());
        assert!(Dense::shared(&apart, &[&desc(Layout::NCHW, &[2, 3, 4, 5])]).is_none());
    }

    /// Every element's offset is visited exactly once, chunks never cross a row, and each
    /// chunk's (c, e0) matches its offset.
    #[test]
    fn chunks_cover_each_element_once() {
        for (layout, lens) in [
            (Layout::NCHW, vec![3, 5, 40, 41]),
            (Layout::NCHW, vec![2, 7, 7, 7]),
            (Layout::NHWC, vec![2, 300, 3, 5]),
            (Layout::NHWC, vec![3, 7, 30, 11]),
        ] {
            let d = desc(layout, &lens);
            let dense = Dense::of(&d).unwrap();
            let seen = Mutex::new(vec![0u8; d.element_space()]);
            let (c, s) = (lens[1], lens[2] * lens[3]);
            dense.for_each_chunk(8, |k, _: &mut [[f32; CHUNK]; 0]| {
                assert!(k.len >= 1 && k.len <= CHUNK);
                let mut seen = seen.lock().unwrap();
                for i in 0..k.len {
                    let (ch, sp) = match dense.rows {
                        Rows::Planar => (k.c, k.e0 + i),
                        Rows::ChannelsLast => ((k.e0 + i) % c, (k.e0 + i) / c),
                    };
                    assert!(sp < s, "{lens:?}: chunk {k:?} leaves its row");
                    // The element's own offset: n from the row start, (c, sp) from the chunk.
                    let n = (k.off + i - (k.e0 + i)) / lens[1..].iter().product::<usize>();
                    assert_eq!(d.offset(&[n, ch, sp / lens[3], sp % lens[3]]), k.off + i, "{lens:?} {layout:?} {k:?}");
                    seen[k.off + i] += 1;
                }
            });
            assert!(seen.into_inner().unwrap().iter().all(|&v| v == 1), "{lens:?} {layout:?}");
        }
    }
}
