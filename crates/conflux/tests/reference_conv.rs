//! The reference convolutions: hand-computed cases, adjoint identities on random
//! geometries, transpose mapping, groups and dilation against independent constructions.

mod support;

use support::layouts::{gapped, packed, random_case};
use support::ConvCase as Case;
use conflux::reference::*;
use conflux::types::ConvMode;
use conflux::{ConvDesc, TensorDesc};

fn conv2d(mode: ConvMode, pad: i64, stride: i64, dil: i64) -> ConvDesc {
    ConvDesc::new_2d(mode, [pad, pad], [stride, stride], [dil, dil]).unwrap()
}

fn fwd(conv: &ConvDesc, xd: &TensorDesc, x: &[f64], wd: &TensorDesc, w: &[f64], yd: &TensorDesc) -> Vec<f64> {
    let mut y = poisoned(yd);
    conv_forward(conv, xd, x, wd, w, yd, &mut y).unwrap();
    gather(yd, &y)
}
fn bwd_data(conv: &ConvDesc, yd: &TensorDesc, dy: &[f64], wd: &TensorDesc, w: &[f64], xd: &TensorDesc) -> Vec<f64> {
    let mut dx = poisoned(xd);
    conv_backward_data(conv, yd, dy, wd, w, xd, &mut dx).unwrap();
    gather(xd, &dx)
}
fn bwd_weights(conv: &ConvDesc, yd: &TensorDesc, dy: &[f64], xd: &TensorDesc, x: &[f64], wd: &TensorDesc) -> Vec<f64> {
    let mut dw = poisoned(wd);
    conv_backward_weights(conv, yd, dy, xd, x, wd, &mut dw).unwrap();
    gather(wd, &dw)
}

// x = 1..9 as 3×3, w = [[1,2],[3,4]], pad 1, stride 2 → output (3+2−2)/2+1 = 2 per dim.
// y[o] = Σ_r x[2o − 1 + r]·w[r]:
//   y00 = x00·w11 = 1·4 = 4
//   y01 = x01·w10 + x02·w11 = 2·3 + 3·4 = 18
//   y10 = x10·w01 + x20·w11 = 4·2 + 7·4 = 36
//   y11 = x11·w00 + x12·w01 + x21·w10 + x22·w11 = 5 + 12 + 24 + 36 = 77
#[test]
fn forward_2d_pad_stride_by_hand() {
    let conv = conv2d(ConvMode::Convolution, 1, 2, 1);
    let (xd, wd, yd) = (packed(&[1, 1, 3, 3]), packed(&[1, 1, 2, 2]), packed(&[1, 1, 2, 2]));
    let x: Vec<f64> = (1..=9).map(f64::from).collect();
    let w = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(fwd(&conv, &xd, &x, &wd, &w, &yd), [4.0, 18.0, 36.0, 77.0]);
    // Same values through a gapped (non-packed) layout for every tensor.
    let (gx, gw, gy) = (gapped(&[1, 1, 3, 3]), gapped(&[1, 1, 2, 2]), gapped(&[1, 1, 2, 2]));
    let got = fwd(&conv, &gx, &scatter(&gx, &x), &gw, &scatter(&gw, &w), &gy);
    assert_eq!(got, [4.0, 18.0, 36.0, 77.0]);
}

// Same geometry, dy = [[1,0],[0,1]]. dy00 reaches only x00 (through w11 = 4); dy11 reaches
// x11,x12,x21,x22 through w00..w11 → dx = [[4,0,0],[0,1,2],[0,3,4]].
#[test]
fn backward_data_2d_by_hand() {
    let conv = conv2d(ConvMode::Convolution, 1, 2, 1);
    let (xd, wd, yd) = (packed(&[1, 1, 3, 3]), packed(&[1, 1, 2, 2]), packed(&[1, 1, 2, 2]));
    let dx = bwd_data(&conv, &yd, &[1.0, 0.0, 0.0, 1.0], &wd, &[1.0, 2.0, 3.0, 4.0], &xd);
    assert_eq!(dx, [4.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 3.0, 4.0]);
}

// dw[r] = Σ_o dy[o]·x[2o − 1 + r] with dy = [[1,0],[0,1]]: o=00 gives dw11 += x00 = 1;
// o=11 gives dw00 += x11 = 5, dw01 += x12 = 6, dw10 += x21 = 8, dw11 += x22 = 9
// → dw = [[5,6],[8,10]].
#[test]
fn backward_weights_2d_by_hand() {
    let conv = conv2d(ConvMode::Convolution, 1, 2, 1);
    let (xd, wd, yd) = (packed(&[1, 1, 3, 3]), packed(&[1, 1, 2, 2]), packed(&[1, 1, 2, 2]));
    let x: Vec<f64> = (1..=9).map(f64::from).collect();
    let dw = bwd_weights(&conv, &yd, &[1.0, 0.0, 0.0, 1.0], &xd, &x, &wd);
    assert_eq!(dw, [5.0, 6.0, 8.0, 10.0]);
}

// Dilation 2 on a 1×5 row with a 1×2 filter [1,10]: y[o] = x[o] + 10·x[o+2], 3 outputs:
// x = 1..5 → [1+30, 2+40, 3+50] = [31, 42, 53].
#[test]
fn dilation_by_hand() {
    let conv = conv2d(ConvMode::Convolution, 0, 1, 2);
    let (xd, wd, yd) = (packed(&[1, 1, 1, 5]), packed(&[1, 1, 1, 2]), packed(&[1, 1, 1, 3]));
    assert_eq!(fwd(&conv, &xd, &[1.0, 2.0, 3.0, 4.0, 5.0], &wd, &[1.0, 10.0], &yd), [31.0, 42.0, 53.0]);
}

// Groups 2, x channels c0 = [1,2], c1 = [3,4], 1×1 filters, K = 4 (2 per group):
// k0,k1 read c0, k2,k3 read c1: w = [1,2,3,4] → y = [1,2 | 2,4 | 9,12 | 12,16].
// G = C = 2 with multiplier 2 is the depthwise shape.
#[test]
fn grouped_and_depthwise_by_hand() {
    let mut conv = conv2d(ConvMode::Convolution, 0, 1, 1);
    conv.set_groups(2).unwrap();
    let (xd, wd, yd) = (packed(&[1, 2, 1, 2]), packed(&[4, 1, 1, 1]), packed(&[1, 4, 1, 2]));
    let y = fwd(&conv, &xd, &[1.0, 2.0, 3.0, 4.0], &wd, &[1.0, 2.0, 3.0, 4.0], &yd);
    assert_eq!(y, [1.0, 2.0, 2.0, 4.0, 9.0, 12.0, 12.0, 16.0]);
    // Backward data sums each group's K back onto its channels:
    // dy all ones → dx c0 = w0 + w1 = 3, dx c1 = w2 + w3 = 7.
    let dx = bwd_data(&conv, &yd, &[1.0; 8], &wd, &[1.0, 2.0, 3.0, 4.0], &xd);
    assert_eq!(dx, [3.0, 3.0, 7.0, 7.0]);
    // Backward weights: dw[k] = Σ_w dy·x over k's group channel; dy ones → [3,3,7,7].
    let dw = bwd_weights(&conv, &yd, &[1.0; 8], &xd, &[1.0, 2.0, 3.0, 4.0], &wd);
    assert_eq!(dw, [3.0, 3.0, 7.0, 7.0]);
}

// 3-D: x = 1..8 as 2×2×2 and an all-ones 2×2×2 filter: y = 1+…+8 = 36.
// With pad 1 and stride 2 the output is (2+2−2)/2+1 = 2 per axis; output o covers inputs
// 2o−1 and 2o, and on a 2-long axis only input o exists there, so y equals x.
#[test]
fn forward_3d_by_hand() {
    let conv = ConvDesc::new(ConvMode::Convolution, &[0, 0, 0], &[1, 1, 1], &[1, 1, 1]).unwrap();
    let (xd, wd, yd) = (packed(&[1, 1, 2, 2, 2]), packed(&[1, 1, 2, 2, 2]), packed(&[1, 1, 1, 1, 1]));
    let x: Vec<f64> = (1..=8).map(f64::from).collect();
    assert_eq!(fwd(&conv, &xd, &x, &wd, &[1.0; 8], &yd), [36.0]);
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1, 1], &[2, 2, 2], &[1, 1, 1]).unwrap();
    let yd = packed(&[1, 1, 2, 2, 2]);
    assert_eq!(fwd(&conv, &xd, &x, &wd, &[1.0; 8], &yd), x);
}

// Transpose, stride 2, pad 0, x = [1,2], w = [1,10,100] along W: width 2·(2−1)+3 = 5,
// y[i] = Σ_j x[j]·w[i − 2j] = [1,10,100,0,0] + [0,0,2,20,200] = [1,10,102,20,200].
// Output padding 1 appends a position nothing reaches (0); pad 1 crops one each side.
#[test]
fn transpose_by_hand() {
    let mut conv = ConvDesc::new_2d(ConvMode::Transpose, [0, 0], [1, 2], [1, 1]).unwrap();
    let (xd, wd) = (packed(&[1, 1, 1, 2]), packed(&[1, 1, 1, 3]));
    let (x, w) = ([1.0, 2.0], [1.0, 10.0, 100.0]);
    assert_eq!(fwd(&conv, &xd, &x, &wd, &w, &packed(&[1, 1, 1, 5])), [1.0, 10.0, 102.0, 20.0, 200.0]);
    conv.set_out_pads(&[0, 1]).unwrap();
    assert_eq!(fwd(&conv, &xd, &x, &wd, &w, &packed(&[1, 1, 1, 6])), [1.0, 10.0, 102.0, 20.0, 200.0, 0.0]);
    let conv = ConvDesc::new_2d(ConvMode::Transpose, [0, 1], [1, 2], [1, 1]).unwrap();
    assert_eq!(fwd(&conv, &xd, &x, &wd, &w, &packed(&[1, 1, 1, 3])), [10.0, 102.0, 20.0]);
}

// Transpose channels: w is [C_in = 2, C_out/G, 1, 1] = [[1,2,3],[4,5,6]], x = [1,2].
// G = 1: y[c] = Σ_k x[k]·w[k,c] = [1+8, 2+10, 3+12] = [9,12,15] (3 = w.C·1 channels).
// G = 2: 6 = w.C·2 channels; group 0 is x0·w[0,:] = [1,2,3], group 1 is x1·w[1,:] = [8,10,12].
#[test]
fn transpose_channels_and_groups_by_hand() {
    let mut conv = conv2d(ConvMode::Transpose, 0, 1, 1);
    let (xd, wd) = (packed(&[1, 2, 1, 1]), packed(&[2, 3, 1, 1]));
    let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    assert_eq!(fwd(&conv, &xd, &[1.0, 2.0], &wd, &w, &packed(&[1, 3, 1, 1])), [9.0, 12.0, 15.0]);
    conv.set_groups(2).unwrap();
    assert_eq!(fwd(&conv, &xd, &[1.0, 2.0], &wd, &w, &packed(&[1, 6, 1, 1])), [1.0, 2.0, 3.0, 8.0, 10.0, 12.0]);
    // Transpose backward-weights: dw[k,c] = Σ x[k]·dy[c] over the group; dy = 1..6.
    let dy: Vec<f64> = (1..=6).map(f64::from).collect();
    let dw = bwd_weights(&conv, &packed(&[1, 6, 1, 1]), &dy, &xd, &[1.0, 2.0], &wd);
    assert_eq!(dw, [1.0, 2.0, 3.0, 8.0, 10.0, 12.0]);
}

#[test]
fn shape_mismatch_is_bad_parm() {
    let conv = conv2d(ConvMode::Convolution, 0, 1, 1);
    let (xd, wd) = (packed(&[1, 1, 3, 3]), packed(&[1, 1, 2, 2]));
    let mut y = vec![0.0; 9];
    let e = conv_forward(&conv, &xd, &[0.0; 9], &wd, &[0.0; 4], &packed(&[1, 1, 3, 3]), &mut y).unwrap_err();
    assert_eq!(e.status, conflux::Status::BadParm);
    assert!(e.reason.contains("do not match"), "{}", e.reason);
    // A buffer shorter than the descriptor's span is refused, not indexed out of bounds.
    let e = conv_forward(&conv, &xd, &[0.0; 8], &wd, &[0.0; 4], &packed(&[1, 1, 2, 2]), &mut y).unwrap_err();
    assert!(e.reason.contains("buffer x"), "{}", e.reason);
}

/// ‖a‖·‖b‖ bounds |⟨a,b⟩|, so it scales the rounding error of either side of an identity.
fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

fn check_adjoint(case: &Case, seed: u64) {
    let Case { conv, x: xd, w: wd, y: yd } = case;
    let x = fill_for(xd, Fill::Normal, seed);
    let w = fill_for(wd, Fill::Normal, seed + 1);
    let dy = fill_for(yd, Fill::Normal, seed + 2);
    let y = fwd(conv, xd, &x, wd, &w, yd);
    let dx = bwd_data(conv, yd, &dy, wd, &w, xd);
    let dw = bwd_weights(conv, yd, &dy, xd, &x, wd);
    // Every output element was written (outputs start as NaN).
    assert!(!has_non_finite(&y) && !has_non_finite(&dx) && !has_non_finite(&dw), "{case:?}");
    let (gx, gw, gdy) = (gather(xd, &x), gather(wd, &w), gather(yd, &dy));
    let lhs = dot(yd, &dy, &packed(yd.lens()), &y); // <dy, fwd(x; w)>
    let via_x: f64 = dx.iter().zip(&gx).map(|(a, b)| a * b).sum(); // <bwd_data(dy; w), x>
    let via_w: f64 = dw.iter().zip(&gw).map(|(a, b)| a * b).sum(); // <bwd_weights(x, dy), w>
    let scale = norm(&gdy) * norm(&y) + norm(&dx) * norm(&gx) + norm(&dw) * norm(&gw);
    assert!((lhs - via_x).abs() <= 1e-12 * scale, "bwd-data adjoint: {lhs} vs {via_x} for {case:?}");
    assert!((lhs - via_w).abs() <= 1e-12 * scale, "bwd-weights adjoint: {lhs} vs {via_w} for {case:?}");
}

#[test]
fn adjoint_identities_on_random_geometries() {
    let mut r = SplitMix64::new(0xC0FFEE);
    let (mut n3d, mut ntr, mut ngr, mut nstrided) = (0, 0, 0, 0);
    for i in 0..400 {
        let case = random_case(&mut r);
        n3d += (case.conv.spatial_dims() == 3) as usize;
        ntr += (case.conv.mode() == ConvMode::Transpose) as usize;
        ngr += (case.conv.groups() > 1) as usize;
        nstrided += (!case.x.is_packed() || case.x.is_channels_last()) as usize;
        check_adjoint(&case, 1000 + 3 * i);
    }
    // The generator really covers the families the identities are meant for.
    assert!(n3d > 50 && ntr > 50 && ngr > 100 && nstrided > 100, "{n3d} {ntr} {ngr} {nstrided}");
}

/// The normal convolution with the same geometry as a transpose one.
fn as_normal(conv: &ConvDesc) -> ConvDesc {
    let i = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let mut n = ConvDesc::new(ConvMode::Convolution, &i(conv.pads()), &i(conv.strides()), &i(conv.dilations())).unwrap();
    n.set_groups(conv.groups() as i64).unwrap();
    n
}

#[test]
fn transpose_equals_normal_with_roles_swapped() {
    let mut r = SplitMix64::new(7);
    let mut checked = 0;
    while checked < 100 {
        let case = random_case(&mut r);
        if case.conv.mode() != ConvMode::Transpose {
            continue;
        }
        let normal = as_normal(&case.conv);
        // The normal conv of the transpose output must give back the transpose input's
        // shape (fails only when the transpose output was clamped to 1).
        if normal.output_lens(&case.y, &case.w).ok().as_deref() != Some(case.x.lens()) {
            continue;
        }
        let Case { conv, x: xd, w: wd, y: yd } = &case;
        let x = fill_for(xd, Fill::Normal, 1);
        let w = fill_for(wd, Fill::Normal, 2);
        let dy = fill_for(yd, Fill::Normal, 3);
        // Transpose forward = normal backward-data (x plays dy, y plays dx).
        assert_eq!(fwd(conv, xd, &x, wd, &w, yd), bwd_data(&normal, xd, &x, wd, &w, yd), "{case:?}");
        // Transpose backward-data = normal forward (dy is the normal input).
        assert_eq!(bwd_data(conv, yd, &dy, wd, &w, xd), fwd(&normal, yd, &dy, wd, &w, xd), "{case:?}");
        // Transpose backward-weights = normal backward-weights with x and dy swapped.
        assert_eq!(bwd_weights(conv, yd, &dy, xd, &x, wd), bwd_weights(&normal, xd, &x, yd, &dy, wd), "{case:?}");
        checked += 1;
    }
}

/// A grouped convolution equals G independent convolutions on channel slices.
#[test]
fn groups_equal_separate_convolutions() {
    let mut r = SplitMix64::new(99);
    let mut checked = 0;
    while checked < 40 {
        let case = random_case(&mut r);
        let g = case.conv.groups();
        if g == 1 || case.conv.mode() == ConvMode::Transpose {
            continue;
        }
        let Case { conv, x: xd, w: wd, y: yd } = &case;
        let x = gather(xd, &fill_for(xd, Fill::SmallInt(-2, 2), 5));
        let w = gather(wd, &fill_for(wd, Fill::SmallInt(-2, 2), 6));
        let y = fwd(conv, &packed(xd.lens()), &x, &packed(wd.lens()), &w, &packed(yd.lens()));
        let single = as_normal(conv);
        let mut single = single;
        single.set_groups(1).unwrap();
        let (n, c, k) = (xd.n(), xd.c(), wd.n());
        let (cg, kg) = (c / g, k / g);
        let (xs, ws, ys): (usize, usize, usize) = (
            xd.spatial().iter().product(),
            wd.c() * wd.spatial().iter().product::<usize>(),
            yd.spatial().iter().product(),
        );
        for grp in 0..g {
            let slice_lens = |l: &[usize], ch: usize| {
                let mut v = l.to_vec();
                v[1] = ch;
                v
            };
            let (gxd, gyd) = (packed(&slice_lens(xd.lens(), cg)), packed(&slice_lens(yd.lens(), kg)));
            let mut gwl = wd.lens().to_vec();
            gwl[0] = kg;
            let gwd = packed(&gwl);
            let mut gx = vec![];
            for b in 0..n {
                let s = (b * c + grp * cg) * xs;
                gx.extend_from_slice(&x[s..s + cg * xs]);
            }
            let gw = &w[grp * kg * ws..(grp + 1) * kg * ws];
            let gy = fwd(&single, &gxd, &gx, &gwd, gw, &gyd);
            for b in 0..n {
                let s = (b * k + grp * kg) * ys;
                assert_eq!(&y[s..s + kg * ys], &gy[b * kg * ys..(b + 1) * kg * ys], "{case:?} group {grp}");
            }
        }
        checked += 1;
    }
}

/// A dilated filter equals the undilated filter with d−1 zeros inserted between taps.
#[test]
fn dilation_equals_zero_inserted_filter() {
    let mut r = SplitMix64::new(4242);
    let mut checked = 0;
    while checked < 40 {
        let case = random_case(&mut r);
        if case.conv.dilations().iter().all(|&d| d == 1) || case.conv.mode() == ConvMode::Transpose {
            continue;
        }
        let Case { conv, x: xd, w: wd, y: yd } = &case;
        let x = fill_for(xd, Fill::Normal, 11);
        let w = gather(wd, &fill_for(wd, Fill::Normal, 12));
        let y = fwd(conv, xd, &x, &packed(wd.lens()), &w, yd);
        // Spread the filter: tap r goes to r·d.
        let d = conv.dilations();
        let mut bl = wd.lens().to_vec();
        for i in 0..d.len() {
            bl[2 + i] = d[i] * (bl[2 + i] - 1) + 1;
        }
        let bd = packed(&bl);
        let mut big = vec![0.0; bd.element_space()];
        let mut it = w.iter();
        conflux::tensor::for_each_index(wd.lens(), |idx| {
            let mut j = idx.to_vec();
            for i in 0..d.len() {
                j[2 + i] *= d[i];
            }
            big[bd.offset(&j)] = *it.next().unwrap();
        });
        let ones: Vec<i64> = vec![1; d.len()];
        let i64s = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        let mut undilated = ConvDesc::new(ConvMode::Convolution, &i64s(conv.pads()), &i64s(conv.strides()), &ones).unwrap();
        undilated.set_groups(conv.groups() as i64).unwrap();
        let y2 = fwd(&undilated, xd, &x, &bd, &big, yd);
        assert!(rel_l2_error(&y2, &y) < 1e-14, "{case:?}");
        checked += 1;
    }
}

// y = α·conv + β·y_old: with conv = [4,18,36,77] from the hand case, α = 2, β = −1 and
// y_old = [1,1,1,1] → [7, 35, 71, 153]. β = 0 never reads y_old (NaN stays out).
#[test]
fn alpha_beta_blending() {
    let conv = conv2d(ConvMode::Convolution, 1, 2, 1);
    let (xd, wd, yd) = (packed(&[1, 1, 3, 3]), packed(&[1, 1, 2, 2]), packed(&[1, 1, 2, 2]));
    let x: Vec<f64> = (1..=9).map(f64::from).collect();
    let w = [1.0, 2.0, 3.0, 4.0];
    let mut y = vec![1.0; 4];
    conv_forward_alpha_beta(2.0, -1.0, &conv, &xd, &x, &wd, &w, &yd, &mut y).unwrap();
    assert_eq!(y, [7.0, 35.0, 71.0, 153.0]);
    let mut y = vec![f64::NAN; 4];
    conv_forward_alpha_beta(0.5, 0.0, &conv, &xd, &x, &wd, &w, &yd, &mut y).unwrap();
    assert_eq!(y, [2.0, 9.0, 18.0, 38.5]);
    // Backward data and weights blend the same way: dx = 1·bwd + 10·1.
    let mut dx = vec![1.0; 9];
    conv_backward_data_alpha_beta(1.0, 10.0, &conv, &yd, &[1.0, 0.0, 0.0, 1.0], &wd, &w, &xd, &mut dx).unwrap();
    assert_eq!(dx, [14.0, 10.0, 10.0, 10.0, 11.0, 12.0, 10.0, 13.0, 14.0]);
    let mut dw = vec![f64::NAN; 4];
    conv_backward_weights_alpha_beta(-1.0, 0.0, &conv, &yd, &[1.0, 0.0, 0.0, 1.0], &xd, &x, &wd, &mut dw).unwrap();
    assert_eq!(dw, [-5.0, -6.0, -8.0, -10.0]);
}

/// Integer data gives exact results under the documented bound (here C·k² · 2·2 = 4·9·4 =
/// 144 ≤ 256, so even bf16 would hold every result exactly).
#[test]
fn small_int_data_gives_exact_integers() {
    let conv = conv2d(ConvMode::Convolution, 1, 1, 1);
    let (xd, wd, yd) = (packed(&[2, 4, 5, 5]), packed(&[3, 4, 3, 3]), packed(&[2, 3, 5, 5]));
    let x = fill_for(&xd, Fill::SmallInt(-2, 2), 1);
    let w = fill_for(&wd, Fill::SmallInt(-2, 2), 2);
    let y = fwd(&conv, &xd, &x, &wd, &w, &yd);
    let bound = 2.0 * 2.0 * (4 * 9) as f64;
    assert!(bound <= exact_integer_limit(conflux::DataType::BFloat16));
    assert!(y.iter().all(|v| v.fract() == 0.0 && v.abs() <= bound));
    assert!(y.iter().all(|&v| conflux::element::round_to(conflux::DataType::BFloat16, v) == v));
}
