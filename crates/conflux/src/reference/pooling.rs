//! Reference pooling: each output's window walked in f64 through the descriptors' strides.
//! Max ignores NaN inputs (a window of only NaN or −∞ gives −∞ and index 0) and keeps the
//! first maximum in window order (D, H, W) on ties, as MIOpen's kernels do.

use super::strided::check_slice;
use crate::error::Result;
use crate::pooling::{PoolGeom, PoolingDesc, PoolingMode};
use crate::tensor::TensorDesc;
use crate::ensure;

/// N, C, three spatial extents and five strides (a 4-D tensor has D = 1, stride 0).
pub(crate) fn shape5(t: &TensorDesc) -> ([usize; 2], [usize; 3], [usize; 5]) {
    let (l, s) = (t.lens(), t.strides());
    match t.rank() {
        5 => ([l[0], l[1]], [l[2], l[3], l[4]], [s[0], s[1], s[2], s[3], s[4]]),
        4 => ([l[0], l[1]], [1, l[2], l[3]], [s[0], s[1], 0, s[2], s[3]]),
        3 => ([l[0], l[1]], [1, 1, l[2]], [s[0], s[1], 0, 0, s[2]]),
        _ => ([l[0], l.get(1).copied().unwrap_or(1)], [1, 1, 1], [s[0], s.get(1).copied().unwrap_or(0), 0, 0, 0]),
    }
}

fn check(p: &PoolingDesc, x: &TensorDesc, y: &TensorDesc) -> Result<()> {
    let want = p.output_lens(x)?;
    ensure!(y.lens() == want.as_slice(), BadParm, "reference pooling: y lengths {:?}, the descriptor gives {want:?}", y.lens());
    Ok(())
}

/// Forward: `y = α·pool(x) + β·y`; returns the index of each output's maximum (packed
/// N, C, D, H, W order; all 0 for average pooling).
pub fn pooling_forward(p: &PoolingDesc, (alpha, beta): (f64, f64), x_desc: &TensorDesc, x: &[f64], y_desc: &TensorDesc, y: &mut [f64]) -> Result<Vec<u64>> {
    check(p, x_desc, y_desc)?;
    check_slice("x", x_desc, x.len())?;
    check_slice("y", y_desc, y.len())?;
    let g = p.geom();
    let ((nc, isp, xs), (_, osp, ys)) = (shape5(x_desc), shape5(y_desc));
    let mut indices = Vec::with_capacity(y_desc.element_count());
    for n in 0..nc[0] {
        for c in 0..nc[1] {
            for_each3(osp, |o| {
                let (mut best, mut idx, mut sum) = (f64::NEG_INFINITY, 0u64, 0.0);
                window(&g, o, isp, |i| {
                    let v = x[n * xs[0] + c * xs[1] + i[0] * xs[2] + i[1] * xs[3] + i[2] * xs[4]];
                    sum += v;
                    if v > best {
                        best = v;
                        idx = g.index_of(i, o, isp);
                    }
                });
                let r = match p.mode {
                    PoolingMode::Max => best,
                    _ => sum / g.divisor(o, isp) as f64,
                };
                let yo = n * ys[0] + c * ys[1] + o[0] * ys[2] + o[1] * ys[3] + o[2] * ys[4];
                y[yo] = alpha * r + if beta != 0.0 { beta * y[yo] } else { 0.0 };
                indices.push(idx);
            });
        }
    }
    Ok(indices)
}

/// Backward: `dx = α·grad + β·dx`, where average pooling spreads each dy over its window
/// (divided as forward divides) and max pooling sends it to the input its index names.
#[allow(clippy::too_many_arguments)]
pub fn pooling_backward(
    p: &PoolingDesc,
    (alpha, beta): (f64, f64),
    dy_desc: &TensorDesc,
    dy: &[f64],
    dx_desc: &TensorDesc,
    dx: &mut [f64],
    indices: &[u64],
) -> Result<()> {
    check(p, dx_desc, dy_desc)?;
    check_slice("dy", dy_desc, dy.len())?;
    check_slice("dx", dx_desc, dx.len())?;
    let g = p.geom();
    let ((nc, isp, xs), (_, osp, ys)) = (shape5(dx_desc), shape5(dy_desc));
    let mut grad = vec![0.0; dx_desc.element_count()];
    let (ipl, opl) = (isp.iter().product::<usize>(), osp.iter().product::<usize>());
    let mut k = 0;
    for n in 0..nc[0] {
        for c in 0..nc[1] {
            let plane = (n * nc[1] + c) * ipl;
            for_each3(osp, |o| {
                let d = dy[n * ys[0] + c * ys[1] + o[0] * ys[2] + o[1] * ys[3] + o[2] * ys[4]];
                let div = g.divisor(o, isp) as f64;
                window(&g, o, isp, |i| {
                    let at = plane + (i[0] * isp[1] + i[1]) * isp[2] + i[2];
                    match p.mode {
                        PoolingMode::Max => {
                            if g.index_of(i, o, isp) == indices[k] {
                                grad[at] += d;
                            }
                        }
                        _ => grad[at] += d / div,
                    }
                });
                k += 1;
            });
        }
    }
    debug_assert_eq!(k, nc[0] * nc[1] * opl);
    let mut j = 0;
    for n in 0..nc[0] {
        for c in 0..nc[1] {
            for_each3(isp, |i| {
                let o = n * xs[0] + c * xs[1] + i[0] * xs[2] + i[1] * xs[3] + i[2] * xs[4];
                dx[o] = alpha * grad[j] + if beta != 0.0 { beta * dx[o] } else { 0.0 };
                j += 1;
            });
        }
    }
    Ok(())
}

fn for_each3(ext: [usize; 3], mut f: impl FnMut([usize; 3])) {
    for d in 0..ext[0] {
        for h in 0..ext[1] {
            for w in 0..ext[2] {
                f([d, h, w]);
            }
        }
    }
}

/// The input positions of output `o`'s window, clipped to the input.
fn window(g: &PoolGeom, o: [usize; 3], input: [usize; 3], mut f: impl FnMut([usize; 3])) {
    let r: [(usize, usize); 3] = std::array::from_fn(|a| g.window_range(a, o[a], input[a]));
    for d in r[0].0..r[0].1 {
        for h in r[1].0..r[1].1 {
            for w in r[2].0..r[2].1 {
                f([d, h, w]);
            }
        }
    }
}
