//! Backward-weights of an f32 depthwise convolution on channels-first planes with AVX-512, over
//! the forward's flat planes (`depthwise_flat::FlatPlan`): for each output channel, each
//! image's dy plane multiplies its x plane (or x's stride phases) shifted by every tap, masked
//! where the forward masks, into 16-lane partial sums per tap; the lanes and images are summed
//! in a fixed order, so reruns give the same bits. x and dy are read once per output channel
//! instead of through a padded copy of every plane.

use crate::backend::cpu::direct::depthwise_flat::{FlatPlan, MAX_TAPS};
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::x86::depthwise_flat::{self as k, PlaneTaps, LANES};
use crate::problem::Geom;
use rayon::prelude::*;

/// Whether dy's planes are dense (the kernel reads each as one flat run).
pub fn dy_planes_dense(g: &Geom) -> bool { g.y_strides[4] == 1 && g.y_strides[3] == g.output[2] }

/// dw = α·conv_bwd_weights(x, dy) + β·dw for a 2-D f32 depthwise convolution that
/// `depthwise_flat::unsuitable` accepts, with dense dy planes (`dy_planes_dense`).
///
/// # Safety
/// The CPU has AVX-512F; the pointers hold the tensors `g` describes (x = x, y = dy, w = dw);
/// `plan` is `g`'s.
pub unsafe fn backward_weights(g: &Geom, plan: &FlatPlan, p: ConvPtrs, alpha: f32, beta: f32) {
    let (kg, taps) = (g.kg(), plan.taps().offsets.len());
    debug_assert!(taps <= MAX_TAPS && dy_planes_dense(g));
    let (xs, ys, ws) = (g.x_strides, g.y_strides, g.w_strides);
    let pt = plan.taps();
    let (xp, yp, wp) = (p.x as usize, p.y as usize, p.w as usize);
    let in_place = plan.phases == [1, 1];
    let phases_len = if in_place { 0 } else { plan.phase_len * plan.phases[0] * plan.phases[1] };
    (0..g.c).into_par_iter().for_each(|c| {
        with_scratch(Slot::Task, phases_len, |phases| {
            let mut acc = vec![[0.0f32; LANES]; kg * taps];
            for n in 0..g.n {
                let x = (xp as *const f32).add(n * xs[0] + c * xs[1]);
                if !in_place {
                    k::split_phases(x, 0..g.input[1], g.input[2], plan.phases[0], plan.phases[1], phases.as_mut_ptr(), plan.pitch, plan.phase_len);
                }
                let src = if in_place { x } else { phases.as_ptr() };
                for j in 0..kg {
                    let dy = (yp as *const f32).add(n * ys[0] + (c * kg + j) * ys[1]);
                    plane(&pt, taps, src, dy, &mut acc[j * taps..][..taps]);
                }
            }
            for j in 0..kg {
                let ko = c * kg + j;
                for t in 0..taps {
                    let sum: f32 = acc[j * taps + t].iter().sum();
                    let (r, s) = (t / g.filter[2], t % g.filter[2]);
                    let at = (wp as *mut f32).add(ko * ws[0] + r * ws[3] + s * ws[4]);
                    // β = 0 never reads dw (it may hold NaN).
                    *at = if beta == 0.0 { alpha * sum } else { alpha * sum + beta * *at };
                }
            }
        });
    });
}

/// One plane's products into `acc`, the kernel instantiated for the plane's tap count.
#[target_feature(enable = "avx512f")]
unsafe fn plane(pt: &PlaneTaps, taps: usize, x: *const f32, dy: *const f32, acc: &mut [[f32; LANES]]) {
    match taps {
        1 => k::plane_weights::<1>(pt, x, dy, acc),
        2 => k::plane_weights::<2>(pt, x, dy, acc),
        3 => k::plane_weights::<3>(pt, x, dy, acc),
        4 => k::plane_weights::<4>(pt, x, dy, acc),
        5 => k::plane_weights::<5>(pt, x, dy, acc),
        6 => k::plane_weights::<6>(pt, x, dy, acc),
        7 => k::plane_weights::<7>(pt, x, dy, acc),
        8 => k::plane_weights::<8>(pt, x, dy, acc),
        _ => k::plane_weights::<9>(pt, x, dy, acc),
    }
}
