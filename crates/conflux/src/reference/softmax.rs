//! Reference softmax in f64, through the descriptors' strides. Instance mode normalizes over
//! every element of an image, Channel mode over the channels of one pixel.

use super::strided::check_slice;
use crate::error::Result;
use super::pooling::shape5;
use crate::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use crate::tensor::TensorDesc;
use crate::ensure;

/// Offsets of each normalized group's elements, one list per group, in logical order.
fn groups(t: &TensorDesc, mode: SoftmaxMode) -> Vec<Vec<usize>> {
    let (nc, sp, s) = shape5(t);
    let at = |n: usize, c: usize, p: [usize; 3]| n * s[0] + c * s[1] + p[0] * s[2] + p[1] * s[3] + p[2] * s[4];
    let mut pixels = Vec::new();
    for d in 0..sp[0] {
        for h in 0..sp[1] {
            for w in 0..sp[2] {
                pixels.push([d, h, w]);
            }
        }
    }
    let mut out = Vec::new();
    for n in 0..nc[0] {
        match mode {
            SoftmaxMode::Instance => out.push((0..nc[1]).flat_map(|c| pixels.iter().map(move |&p| at(n, c, p))).collect()),
            SoftmaxMode::Channel => out.extend(pixels.iter().map(|&p| (0..nc[1]).map(|c| at(n, c, p)).collect())),
        }
    }
    out
}

fn same_lens(op: &str, a: &TensorDesc, b: &TensorDesc) -> Result<()> {
    ensure!(a.lens() == b.lens(), BadParm, "{op}: lengths {:?} and {:?} differ", a.lens(), b.lens());
    Ok(())
}

/// `y = α·softmax(x) + β·y` (Log: log-softmax).
pub fn softmax_forward(algo: SoftmaxAlgorithm, mode: SoftmaxMode, (alpha, beta): (f64, f64), x_desc: &TensorDesc, x: &[f64], y_desc: &TensorDesc, y: &mut [f64]) -> Result<()> {
    same_lens("reference softmax forward", x_desc, y_desc)?;
    check_slice("x", x_desc, x.len())?;
    check_slice("y", y_desc, y.len())?;
    for (gx, gy) in groups(x_desc, mode).into_iter().zip(groups(y_desc, mode)) {
        let m = gx.iter().map(|&o| x[o]).fold(f64::NEG_INFINITY, f64::max);
        let shift = if algo == SoftmaxAlgorithm::Fast { 0.0 } else { m };
        let sum: f64 = gx.iter().map(|&o| (x[o] - shift).exp()).sum();
        for (&xo, &yo) in gx.iter().zip(&gy) {
            let v = match algo {
                SoftmaxAlgorithm::Log => x[xo] - shift - sum.ln(),
                _ => (x[xo] - shift).exp() / sum,
            };
            y[yo] = alpha * v + if beta != 0.0 { beta * y[yo] } else { 0.0 };
        }
    }
    Ok(())
}

/// `dx = α·grad + β·dx`: y·(dy − Σ dy·y) for Fast and Accurate, dy − exp(y)·Σ dy for Log
/// (y is the forward output, a log-probability under Log).
#[allow(clippy::too_many_arguments)]
pub fn softmax_backward(
    algo: SoftmaxAlgorithm,
    mode: SoftmaxMode,
    (alpha, beta): (f64, f64),
    y_desc: &TensorDesc,
    y: &[f64],
    dy_desc: &TensorDesc,
    dy: &[f64],
    dx_desc: &TensorDesc,
    dx: &mut [f64],
) -> Result<()> {
    same_lens("reference softmax backward", y_desc, dy_desc)?;
    same_lens("reference softmax backward", y_desc, dx_desc)?;
    check_slice("y", y_desc, y.len())?;
    check_slice("dy", dy_desc, dy.len())?;
    check_slice("dx", dx_desc, dx.len())?;
    let (gy, gdy, gdx) = (groups(y_desc, mode), groups(dy_desc, mode), groups(dx_desc, mode));
    for ((gy, gdy), gdx) in gy.iter().zip(&gdy).zip(&gdx) {
        let log = algo == SoftmaxAlgorithm::Log;
        let s: f64 = gy.iter().zip(gdy).map(|(&a, &b)| if log { dy[b] } else { dy[b] * y[a] }).sum();
        for ((&yo, &dyo), &dxo) in gy.iter().zip(gdy).zip(gdx) {
            let g = if log { dy[dyo] - y[yo].exp() * s } else { y[yo] * (dy[dyo] - s) };
            dx[dxo] = alpha * g + if beta != 0.0 { beta * dx[dxo] } else { 0.0 };
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DataType;

    #[test]
    fn hand_computed_channel_and_instance() {
        // Two channels at two pixels: [0, ln 3] per pixel gives [1/4, 3/4].
        let d = TensorDesc::new(DataType::Float, &[1, 2, 1, 2]).unwrap();
        let l3 = 3f64.ln();
        let x = [0.0, 0.0, l3, l3];
        let mut y = [0.0; 4];
        softmax_forward(SoftmaxAlgorithm::Accurate, SoftmaxMode::Channel, (1.0, 0.0), &d, &x, &d, &mut y).unwrap();
        for (a, b) in y.iter().zip([0.25, 0.25, 0.75, 0.75]) {
            assert!((a - b).abs() < 1e-15);
        }
        // Instance: all four elements together: weights 1, 1, 3, 3 over 8.
        softmax_forward(SoftmaxAlgorithm::Fast, SoftmaxMode::Instance, (1.0, 0.0), &d, &x, &d, &mut y).unwrap();
        for (a, b) in y.iter().zip([0.125, 0.125, 0.375, 0.375]) {
            assert!((a - b).abs() < 1e-15);
        }
        softmax_forward(SoftmaxAlgorithm::Log, SoftmaxMode::Instance, (1.0, 0.0), &d, &x, &d, &mut y).unwrap();
        assert!((y[2] - 0.375f64.ln()).abs() < 1e-15);
    }

    #[test]
    fn backward_matches_finite_differences() {
        let d = TensorDesc::new(DataType::Float, &[2, 3, 2, 1]).unwrap();
        let x: Vec<f64> = (0..12).map(|i| ((i * 7) % 5) as f64 * 0.3 - 0.5).collect();
        let dy: Vec<f64> = (0..12).map(|i| ((i * 3) % 7) as f64 * 0.2 - 0.6).collect();
        for algo in [SoftmaxAlgorithm::Accurate, SoftmaxAlgorithm::Log] {
            for mode in [SoftmaxMode::Instance, SoftmaxMode::Channel] {
                let f = |x: &[f64]| {
                    let mut y = vec![0.0; 12];
                    softmax_forward(algo, mode, (1.0, 0.0), &d, x, &d, &mut y).unwrap();
                    y.iter().zip(&dy).map(|(a, b)| a * b).sum::<f64>()
                };
                let mut y = vec![0.0; 12];
                softmax_forward(algo, mode, (1.0, 0.0), &d, &x, &d, &mut y).unwrap();
                let mut dx = vec![0.0; 12];
                softmax_backward(algo, mode, (1.0, 0.0), &d, &y, &d, &dy, &d, &mut dx).unwrap();
                for i in 0..12 {
                    let (mut a, mut b) = (x.clone(), x.clone());
                    a[i] += 1e-6;
                    b[i] -= 1e-6;
                    let fd = (f(&a) - f(&b)) / 2e-6;
                    assert!((fd - dx[i]).abs() < 1e-6, "{algo:?} {mode:?} [{i}]: {fd} vs {}", dx[i]);
                }
            }
        }
    }
}
