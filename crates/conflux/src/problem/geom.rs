//! Convolution geometry normalised to three spatial dimensions (a 2-D problem gets D = 1),
//! so every kernel, CPU or GPU, has one set of loops.

use super::ConvProblem;
use crate::tensor::TensorDesc;

/// Logical N, C, (D, H, W) lengths and the five matching strides of a tensor. 4-D and 5-D
/// tensors map directly (D = 1, stride 0 for 4-D); lower ranks are read as N, C, W.
pub fn shape5(t: &TensorDesc) -> ([usize; 2], [usize; 3], [usize; 5]) {
    let (l, s) = (t.lens(), t.strides());
    match t.rank() {
        4 => ([l[0], l[1]], [1, l[2], l[3]], [s[0], s[1], 0, s[2], s[3]]),
        5 => ([l[0], l[1]], [l[2], l[3], l[4]], [s[0], s[1], s[2], s[3], s[4]]),
        r => {
            let get = |i: usize| if i < r { (l[i], s[i]) } else { (1, 0) };
            let ((n, sn), (c, sc), (w, sw)) = (get(0), get(1), get(2));
            ([n, c], [1, 1, w], [sn, sc, 0, 0, sw])
        }
    }
}

/// Five strides N, C, D, H, W (D stride 0 for 4-D).
pub fn strides5(t: &TensorDesc) -> [usize; 5] {
    shape5(t).2
}

/// Three spatial lengths D, H, W (D = 1 for 4-D tensors).
pub fn spatial3(t: &TensorDesc) -> [usize; 3] {
    shape5(t).1
}

/// Geometry of the normal convolution of a problem, in 3-D form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geom {
    pub n: usize,
    /// Input channels (all groups) and output channels (all groups).
    pub c: usize,
    pub k: usize,
    pub groups: usize,
    pub input: [usize; 3],
    pub output: [usize; 3],
    pub filter: [usize; 3],
    /// Padding before and after each spatial dimension (equal unless the problem is an
    /// internal sub-convolution: `ConvDesc::pads_end`).
    pub pad: [usize; 3],
    pub pad_end: [usize; 3],
    pub stride: [usize; 3],
    pub dilation: [usize; 3],
    pub x_strides: [usize; 5],
    pub w_strides: [usize; 5],
    pub y_strides: [usize; 5],
}

impl Geom {
    pub fn of(p: &ConvProblem) -> Geom {
        let nd = p.spatial_dims();
        let lift = |v: &[usize], fill: usize| -> [usize; 3] {
            if nd == 2 { [fill, v[0], v[1]] } else { [v[0], v[1], v[2]] }
        };
        Geom {
            n: p.x.n(),
            c: p.x.c(),
            k: p.w.n(),
            groups: p.groups(),
            input: spatial3(&p.x),
            output: spatial3(&p.y),
            filter: spatial3(&p.w),
            pad: lift(p.conv.pads(), 0),
            pad_end: lift(p.conv.pads_end(), 0),
            stride: lift(p.conv.strides(), 1),
            dilation: lift(p.conv.dilations(), 1),
            x_strides: strides5(&p.x),
            w_strides: strides5(&p.w),
            y_strides: strides5(&p.y),
        }
    }
    /// Input channels per group.
    pub fn cg(&self) -> usize { self.c / self.groups }
    /// Output channels per group.
    pub fn kg(&self) -> usize { self.k / self.groups }
    pub fn filter_size(&self) -> usize { self.filter.iter().product() }
    pub fn output_size(&self) -> usize { self.output.iter().product() }
    pub fn input_size(&self) -> usize { self.input.iter().product() }
    /// A 2-D convolution (a 3-D one is 2-D when input, filter and output all have depth 1 and
    /// the depth has no padding: a padded depth reads zeros a 2-D kernel would not see).
    pub fn is_2d(&self) -> bool {
        self.input[0] == 1 && self.filter[0] == 1 && self.output[0] == 1 && self.pad[0] == 0 && self.pad_end[0] == 0
    }
}
