//! Reference of the quantized (int8 and fp8) forward convolution, following `quant.rs`:
//! the exact sum (f64 holds every int8 and fp8 product sum exactly), `v = α·acc + β·y_old`,
//! the epilogue, then the output conversion (round half to even and saturate for the integer
//! types; round to nearest even or stochastically, saturating, for fp8). Tensors hold values
//! (int8 values, fp8 values already decoded); inputs must be exactly representable.

use super::conv::conv_forward;
use super::fused::{forward_chain, ChainOp};
use super::strided::{check_slice, gather, offsets};
use crate::conv_desc::ConvDesc;
use crate::error::Result;
use crate::quant::{conv_types, stochastic_bits, Fp8, Rounding};
use crate::tensor::TensorDesc;
use crate::types::{ConvAttrib, ConvMode, DataType, Direction};
use crate::{bail, ensure};

/// `v` as stored in a tensor of `dtype`, for output element `index` (its logical row-major
/// index, which feeds stochastic rounding when `stochastic`).
pub fn quantize_output(dtype: DataType, stochastic: bool, index: u64, v: f64) -> f64 {
    match dtype {
        DataType::Int8 => if v.is_nan() { 0.0 } else { v.round_ties_even().clamp(-128.0, 127.0) },
        DataType::Int32 => if v.is_nan() { 0.0 } else { v.round_ties_even().clamp(i32::MIN as f64, i32::MAX as f64) },
        DataType::Float8 | DataType::BFloat8 => {
            let f = Fp8::of(dtype).expect("an fp8 type");
            let r = if stochastic { Rounding::Stochastic(stochastic_bits(index)) } else { Rounding::Nearest };
            // The kernels convert the f32 value; so does the reference.
            f.decode(f.encode(v as f32, r)) as f64
        }
        other => crate::element::round_to(other, v),
    }
}

/// Checks that every value of `data` (through `desc`) is exactly a value of its type.
fn check_representable(name: &str, desc: &TensorDesc, data: &[f64]) -> Result<()> {
    for v in gather(desc, data) {
        let ok = match desc.dtype() {
            DataType::Int8 => v.fract() == 0.0 && (-128.0..=127.0).contains(&v),
            dt => crate::element::round_to(dt, v).to_bits() == v.to_bits() || v.is_nan(),
        };
        ensure!(ok, BadParm, "reference quantized convolution: {name} value {v} is not a {:?} value", desc.dtype());
    }
    Ok(())
}

/// y = convert(epilogue(α·conv(x, w) + β·y)) for an int8 or fp8 forward convolution; the
/// epilogue ops (no convolution among them) run in plan order on the packed value tensor.
#[allow(clippy::too_many_arguments)]
pub fn quantized_conv_forward(
    alpha: f64,
    beta: f64,
    conv: &ConvDesc,
    x_desc: &TensorDesc,
    x: &[f64],
    w_desc: &TensorDesc,
    w: &[f64],
    epilogue: &mut [ChainOp],
    y_desc: &TensorDesc,
    y: &mut [f64],
) -> Result<()> {
    let op = "reference quantized convolution";
    let dir = if conv.mode() == ConvMode::Transpose { Direction::BackwardData } else { Direction::Forward };
    ensure!(conv_types(op, dir, x_desc, w_desc, y_desc)?.is_some(), BadParm, "{op}: not an int8 or fp8 convolution");
    if epilogue.iter().any(|o| matches!(o, ChainOp::Conv { .. } | ChainOp::BnTraining { .. })) {
        bail!(BadParm, "{op}: the epilogue holds pointwise and BN-inference ops only");
    }
    check_slice("y", y_desc, y.len())?;
    check_representable("x", x_desc, x)?;
    check_representable("w", w_desc, w)?;
    let packed = TensorDesc::new(DataType::Float, y_desc.lens())?;
    let mut acc = vec![0.0; packed.element_space()];
    conv_forward(conv, x_desc, x, w_desc, w, &packed, &mut acc)?;
    let raw = y_desc.dtype() == DataType::Int32 && alpha == 1.0 && beta == 0.0 && epilogue.is_empty();
    let v: Vec<f64> = if raw {
        acc
    } else {
        let old = if beta != 0.0 { gather(y_desc, y) } else { vec![0.0; acc.len()] };
        let pre: Vec<f64> = acc.iter().zip(&old).map(|(a, o)| alpha * a + if beta != 0.0 { beta * o } else { 0.0 }).collect();
        let mut out = vec![0.0; pre.len()];
        forward_chain(&packed, &pre, epilogue, &packed, &mut out)?;
        out
    };
    let stochastic = conv.attribute(ConvAttrib::Fp8RoundingMode) == 1;
    for (i, (o, val)) in offsets(y_desc).into_iter().zip(v).enumerate() {
        y[o] = quantize_output(y_desc.dtype(), stochastic, i as u64, val);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::ActivationDesc;
    use crate::types::ActivationMode;

    fn desc(dt: DataType, lens: &[usize]) -> TensorDesc { TensorDesc::new(dt, lens).unwrap() }

    /// A 1×1-channel 3×3 input, 2×2 filter, hand-computed sums.
    fn case(y: DataType) -> (ConvDesc, TensorDesc, Vec<f64>, TensorDesc, Vec<f64>, TensorDesc) {
        let conv = ConvDesc::new_2d(ConvMode::Convolution, [0, 0], [1, 1], [1, 1]).unwrap();
        let x = vec![1.0, -2.0, 3.0, 4.0, 127.0, -128.0, 0.0, 5.0, -1.0];
        let w = vec![127.0, -128.0, 2.0, 1.0];
        (conv, desc(DataType::Int8, &[1, 1, 3, 3]), x, desc(DataType::Int8, &[1, 1, 2, 2]), w, desc(y, &[1, 1, 2, 2]))
    }

    // y[0,0] = 127·1 − 128·(−2) + 2·4 + 1·127 = 127 + 256 + 8 + 127 = 518
    // y[0,1] = 127·(−2) − 128·3 + 2·127 + 1·(−128) = −254 − 384 + 254 − 128 = −512
    // y[1,0] = 127·4 − 128·127 + 2·0 + 1·5 = 508 − 16256 + 5 = −15743
    // y[1,1] = 127·127 − 128·(−128) + 2·5 + 1·(−1) = 16129 + 16384 + 10 − 1 = 32522
    const SUMS: [f64; 4] = [518.0, -512.0, -15743.0, 32522.0];

    #[test]
    fn int32_output_is_the_exact_sum() {
        let (conv, xd, x, wd, w, yd) = case(DataType::Int32);
        let mut y = vec![f64::NAN; 4];
        quantized_conv_forward(1.0, 0.0, &conv, &xd, &x, &wd, &w, &mut [], &yd, &mut y).unwrap();
        assert_eq!(y, SUMS);
    }

    #[test]
    fn int8_output_requantizes_with_ties_to_even_and_saturation() {
        let (conv, xd, x, wd, w, yd) = case(DataType::Int8);
        let mut y = vec![f64::NAN; 4];
        // α = 1/4: 129.5 → 127 (saturated), −128 exactly, −3935.75 → −128, 8130.5 → 127.
        quantized_conv_forward(0.25, 0.0, &conv, &xd, &x, &wd, &w, &mut [], &yd, &mut y).unwrap();
        assert_eq!(y, [127.0, -128.0, -128.0, 127.0]);
        // α = 1/1024: 0.505… → 1, −0.5 → −0 (tie to even), −15.37… → −15, 31.76… → 32.
        quantized_conv_forward(1.0 / 1024.0, 0.0, &conv, &xd, &x, &wd, &w, &mut [], &yd, &mut y).unwrap();
        assert_eq!(y, [1.0, 0.0, -15.0, 32.0]);
        // α = 1/1024 plus 0.5 bias and ReLU: 1.0059 → 1, 0 → 0, 0 → 0, 32.26 → 32.
        let bd = desc(DataType::Float, &[1, 1, 1, 1]);
        let mut ops = [ChainOp::Bias { b_desc: &bd, b: &[0.5] }, ChainOp::Activation(ActivationDesc::new(ActivationMode::Relu, 0.0, 0.0, 0.0))];
        quantized_conv_forward(1.0 / 1024.0, 0.0, &conv, &xd, &x, &wd, &w, &mut ops, &yd, &mut y).unwrap();
        assert_eq!(y, [1.0, 0.0, 0.0, 32.0]);
    }

    #[test]
    fn float_output_with_alpha_beta_and_residual() {
        let (conv, xd, x, wd, w, yd) = case(DataType::Float);
        let mut y = vec![1.0, 2.0, 3.0, 4.0];
        let zd = desc(DataType::Float, &[1, 1, 2, 2]);
        let mut ops = [ChainOp::AddTensor { z_desc: &zd, z: &[10.0, 20.0, 30.0, 40.0], alpha: 0.5 }];
        quantized_conv_forward(2.0, -1.0, &conv, &xd, &x, &wd, &w, &mut ops, &yd, &mut y).unwrap();
        assert_eq!(y, [2.0 * 518.0 - 1.0 + 5.0, -1024.0 - 2.0 + 10.0, -31486.0 - 3.0 + 15.0, 65044.0 - 4.0 + 20.0]);
    }

    #[test]
    fn fp8_sums_and_fp8_outputs() {
        let conv = ConvDesc::new_2d(ConvMode::Convolution, [1, 1], [1, 1], [1, 1]).unwrap();
        let xd = desc(DataType::Float8, &[1, 1, 1, 1]);
        let wd = desc(DataType::BFloat8, &[1, 1, 3, 3]);
        let w = [0.0, 0.0, 0.0, 0.0, 1.5, 0.0, 0.0, 0.0, 0.0];
        // 1 × 1 output: x·w[1,1] = 448 · 1.5 = 672: e4m3 saturates to 448, e5m2 holds 640 or 768
        // (spacing 128 above 512: 672 is 5.25 steps → 640 nearest).
        for (dt, want) in [(DataType::Float, 672.0), (DataType::Float8, 448.0), (DataType::BFloat8, 640.0), (DataType::Half, 672.0)] {
            let yd = desc(dt, &[1, 1, 1, 1]);
            let mut y = [f64::NAN];
            quantized_conv_forward(1.0, 0.0, &conv, &xd, &[448.0], &wd, &w, &mut [], &yd, &mut y).unwrap();
            assert_eq!(y[0], want, "{dt:?}");
        }
        // A value that is not an e4m3 value is refused.
        let yd = desc(DataType::Float, &[1, 1, 1, 1]);
        assert!(quantized_conv_forward(1.0, 0.0, &conv, &xd, &[449.0], &wd, &w, &mut [], &yd, &mut [0.0]).is_err());
    }

    #[test]
    fn refuses_float_and_mixed_problems() {
        let (conv, _, x, _, w, _) = case(DataType::Float);
        let f = desc(DataType::Float, &[1, 1, 3, 3]);
        let fw = desc(DataType::Half, &[1, 1, 2, 2]);
        let i = desc(DataType::Int8, &[1, 1, 3, 3]);
        let y = desc(DataType::Float, &[1, 1, 2, 2]);
        assert!(quantized_conv_forward(1.0, 0.0, &conv, &f, &x, &desc(DataType::Float, &[1, 1, 2, 2]), &w, &mut [], &y, &mut [0.0; 4]).is_err());
        assert!(quantized_conv_forward(1.0, 0.0, &conv, &i, &x, &fw, &w, &mut [], &y, &mut [0.0; 4]).is_err());
    }
}
