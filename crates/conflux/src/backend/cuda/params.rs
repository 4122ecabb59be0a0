//! `#[repr(C)]` mirrors of the kernel parameter structs in `kernels/common.cuh`. The
//! preamble passes `size_of::<Params>()` to the kernel source, whose static_assert catches
//! any drift between the two definitions.

use crate::problem::Geom;

pub const MAX_EPI: usize = 8;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EpiArgC {
    pub p: [u64; 4],
    pub s: [i64; 5],
    pub f: [f32; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Params {
    pub x: u64,
    pub w: u64,
    pub y: u64,
    pub aux: [u64; 12],
    pub xs: [i64; 5],
    pub ws: [i64; 5],
    pub ys: [i64; 5],
    pub n: i32,
    pub c: i32,
    pub k: i32,
    pub groups: i32,
    pub input: [i32; 3],
    pub output: [i32; 3],
    pub fil: [i32; 3],
    pub pad: [i32; 3],
    pub stride: [i32; 3],
    pub dil: [i32; 3],
    pub alpha: f32,
    pub beta: f32,
    pub f: [f32; 6],
    pub epi: [EpiArgC; MAX_EPI],
}

fn i3(v: [usize; 3]) -> [i32; 3] { [v[0] as i32, v[1] as i32, v[2] as i32] }
pub fn s5(v: [usize; 5]) -> [i64; 5] { v.map(|x| x as i64) }

impl Params {
    /// Geometry fields of a convolution (pointers and scalars are filled per run).
    pub fn conv(g: &Geom) -> Params {
        Params {
            xs: s5(g.x_strides),
            ws: s5(g.w_strides),
            ys: s5(g.y_strides),
            n: g.n as i32,
            c: g.c as i32,
            k: g.k as i32,
            groups: g.groups as i32,
            input: i3(g.input),
            output: i3(g.output),
            fil: i3(g.filter),
            pad: i3(g.pad),
            stride: i3(g.stride),
            dil: i3(g.dilation),
            alpha: 1.0,
            ..Default::default()
        }
    }

    /// Shape fields of a pointwise or batch-norm problem over an N×C×D×H×W tensor.
    pub fn shape(nc: [usize; 2], sp: [usize; 3], xs: [usize; 5], ys: [usize; 5]) -> Params {
        Params { n: nc[0] as i32, c: nc[1] as i32, input: i3(sp), xs: s5(xs), ys: s5(ys), alpha: 1.0, ..Default::default() }
    }
}
