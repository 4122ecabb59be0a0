//! Layout conversion on the GPU: a 16-bit channels-first tensor (NCHW x, KCRS w, or any
//! strides with the same dimension order) into a packed channels-last buffer
//! (kernels/to_channels_last.cu). One module serves every shape: sizes are run-time arguments.

use super::CudaBackend;
use crate::error::{Error, Result};
use crate::tensor::TensorDesc;

const SOURCE: &str = include_str!("kernels/to_channels_last.cu");

/// A tensor seen as [outer][C][P] with P = its spatial positions in order (rows of W).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelsFirst {
    pub outer: usize,
    pub c: usize,
    pub p: usize,
    pub w: usize,
    /// Element strides of outer, channel, row and column.
    pub strides: [usize; 4],
}

impl ChannelsFirst {
    /// The view of a 4-D or 5-D descriptor, if its spatial dimensions before W collapse into
    /// rows of one stride (always for 4-D; for 5-D when D steps over whole H planes).
    pub fn of(t: &TensorDesc) -> Option<ChannelsFirst> {
        let (l, s) = (t.lens(), t.strides());
        let r = l.len();
        if !(4..=5).contains(&r) || (r == 5 && s[2] != l[3] * s[3]) {
            return None;
        }
        let p: usize = l[2..].iter().product();
        Some(ChannelsFirst { outer: l[0], c: l[1], p, w: l[r - 1], strides: [s[0], s[1], s[r - 2], s[r - 1]] })
    }

    /// Bytes of the packed channels-last copy.
    pub fn packed_bytes(&self) -> usize { self.outer * self.c * self.p * 2 }

    /// Why the kernel cannot take this view (grid limits, odd channel count), if it cannot.
    pub fn refusal(&self) -> Option<String> {
        if self.c % 2 != 0 {
            return Some(format!("{} channels: the layout kernel stores channel pairs", self.c));
        }
        if self.outer > 65535 || self.c.div_ceil(64) > 65535 {
            return Some(format!("{} × {} channels exceed the layout kernel's grid", self.outer, self.c));
        }
        if self.outer * self.c * self.p >= i64::MAX as usize / 4 {
            return Some("tensor too large".into());
        }
        None
    }
}

/// Mirrors `ToChannelsLastArgs`.
#[repr(C)]
struct Args {
    src: u64,
    dst: u64,
    strides: [i64; 4],
    c: i32,
    p: i32,
    w: i32,
}

/// dst[(o·P + p)·C + c] = src[o, c, p] on the device's stream. `dst` holds `packed_bytes()`.
pub fn to_channels_last(be: &CudaBackend, v: &ChannelsFirst, src: u64, dst: u64) -> Result<()> {
    if let Some(why) = v.refusal() {
        return Err(Error::not_implemented(format!("to_channels_last: {why}")));
    }
    let k = be.module("to_channels_last", SOURCE)?.function("to_channels_last")?;
    let args = Args { src, dst, strides: v.strides.map(|s| s as i64), c: v.c as i32, p: v.p as i32, w: v.w as i32 };
    let grid = (v.p.div_ceil(64) as u32, v.c.div_ceil(64) as u32, v.outer as u32);
    // SAFETY: Args mirrors the kernel's struct; src spans the view (the caller's validated
    // tensor) and dst the packed copy; the grid covers the view within its limits (refusal).
    unsafe { k.launch(&be.dev, grid, (256, 1, 1), 0, &args) }
}
