//! Executing a fuzzed fusion plan: arguments for each op, a strided output, and the chain
//! recomputed in f64 in the ops' order.

use super::conv::{c_tensor, space};
use super::harness::*;
use conflux::{ActivationDesc, ActivationMode, ConvDesc, ConvMode, DataType, TensorDesc};
use std::ffi::c_void;
use std::ptr::null_mut;
use MIOpen::fusion::*;
use MIOpen::handle::MiopenHandle;
use MIOpen::tensor::*;

const LEAKY_SLOPE: f64 = 0.25;

/// `ops`: (kind, op handle, status, channels after the op) of the ops the plan accepted.
#[allow(clippy::too_many_arguments)]
pub fn execute(r: &mut Rng, s: &mut Stats, h: MiopenHandle, plan: MiopenPlan, xd: MiopenTensor, lens: &[usize], xs: &[usize], ops: &[(u8, MiopenOp, i32, usize)], act_mode: i32, k: usize) {
    let mut args = null_mut();
    s.call("miopenCreateOperatorArgs", || unsafe { miopenCreateOperatorArgs(&mut args) });
    let mut x = HostBuf::filled(space(lens, xs), || r.small_int(2));
    // Packed NCHW values of the running result, recomputed op by op.
    let in_desc = TensorDesc::with_strides(DataType::Float, lens, xs).unwrap();
    let mut cur = packed_values(&in_desc, &x.f64s());
    // Per element, a bound on the magnitude of the terms behind it (Σ|w|·|x| through each
    // convolution): f32 sums are accurate relative to that, not to a result that cancels.
    let mut mag: Vec<f64> = cur.iter().map(|v| v.abs()).collect();
    let mut cur_lens = lens.to_vec();
    // The plan's output descriptor: the input's, or after a convolution a packed one in the
    // input's layout family (`conv::output_desc_like`); execute requires exactly it.
    let mut derived = in_desc.clone();
    let mut keep = Vec::new();
    let (one, zero) = (1.0f32, 0.0f32);
    let (pa, pb) = ((&one as *const f32).cast::<c_void>(), (&zero as *const f32).cast::<c_void>());
    for &(kind, op, _, channels) in ops {
        let c_in = cur_lens[1];
        match kind {
            0 => {
                let mut w = HostBuf::filled(k * c_in * 9, || r.small_int(1));
                let p = w.ptr();
                s.call("miopenSetOpArgsConvForward", || unsafe { miopenSetOpArgsConvForward(args, op, pa, pb, p) });
                let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
                let (xin, wdesc) = (TensorDesc::new(DataType::Float, &cur_lens).unwrap(), TensorDesc::new(DataType::Float, &[k, c_in, 3, 3]).unwrap());
                let out = conv.output_desc(&xin, &wdesc).unwrap();
                let mut y = vec![0.0; out.element_space()];
                conflux::reference::conv_forward(&conv, &xin, &cur, &wdesc, &w.f64s(), &out, &mut y).unwrap();
                let mut m = vec![0.0; out.element_space()];
                let abs_w: Vec<f64> = w.f64s().iter().map(|v| v.abs()).collect();
                conflux::reference::conv_forward(&conv, &xin, &mag, &wdesc, &abs_w, &out, &mut m).unwrap();
                cur = y;
                mag = m;
                cur_lens = out.lens().to_vec();
                derived = conflux::conv::output_desc_like(&derived, &cur_lens).unwrap();
                keep.push(w);
            }
            1 => {
                let mut b = HostBuf::filled(channels, || r.small_int(3));
                let p = b.ptr();
                s.call("miopenSetOpArgsBiasForward", || unsafe { miopenSetOpArgsBiasForward(args, op, pa, pb, p) });
                let per = cur.len() / cur_lens[0] / channels;
                for (i, (v, m)) in cur.iter_mut().zip(&mut mag).enumerate() {
                    let bias = b.body()[(i / per) % channels] as f64;
                    *v += bias;
                    *m += bias.abs();
                }
                keep.push(b);
            }
            2 => {
                s.call("miopenSetOpArgsActivForward", || unsafe { miopenSetOpArgsActivForward(args, op, pa, pb, LEAKY_SLOPE, 1.0, 1.0) });
                let d = ActivationDesc::new(ActivationMode::from_i32(act_mode).unwrap(), LEAKY_SLOPE, 1.0, 1.0);
                // Each of these modes moves its input by at most its own size (slopes ≤ 1.1).
                for (v, m) in cur.iter_mut().zip(&mut mag) {
                    *v = d.forward(*v);
                    *m = m.max(v.abs()) * 1.1;
                }
            }
            _ => {
                // Powers of two keep the normalization exact: scale·(x − mean)/sqrt(var + ε) + bias.
                let mut scale = HostBuf::filled(channels, || r.pick(&[0.5f32, 1.0, 2.0]));
                let mut bias = HostBuf::filled(channels, || r.small_int(2));
                let mut mean = HostBuf::filled(channels, || r.small_int(2));
                let mut var = HostBuf::filled(channels, || r.pick(&[1.0f32, 4.0]));
                let (p1, p2, p3, p4) = (scale.ptr(), bias.ptr(), mean.ptr(), var.ptr());
                s.call("miopenSetOpArgsBatchNormInference", || unsafe { miopenSetOpArgsBatchNormInference(args, op, pa, pb, p1, p2, p3, p4, 0.0) });
                let per = cur.len() / cur_lens[0] / channels;
                for (i, v) in cur.iter_mut().enumerate() {
                    let ch = (i / per) % channels;
                    let (g, b, m, va) = (scale.body()[ch] as f64, bias.body()[ch] as f64, mean.body()[ch] as f64, var.body()[ch] as f64);
                    *v = g * (*v - m) / va.sqrt() + b;
                    mag[i] = g.abs() * (mag[i] + m.abs()) / va.sqrt() + b.abs();
                }
                keep.extend([scale, bias, mean, var]);
            }
        }
    }
    let random_layout = r.chance(0.2);
    let ys = if random_layout { strides_for(r, &cur_lens) } else { derived.strides().to_vec() };
    let invalid = random_layout && ys != derived.strides();
    if let Some(yd) = c_tensor(s, &cur_lens.iter().map(|v| *v as i64).collect::<Vec<_>>(), &ys.iter().map(|v| *v as i64).collect::<Vec<_>>()) {
        let mut y = HostBuf::poisoned(space(&cur_lens, &ys));
        let before = y.bits();
        let (px, py) = (x.ptr(), y.ptr());
        let status = s.call("miopenExecuteFusionPlan", || unsafe { miopenExecuteFusionPlan(h, plan, xd, px, yd, py, args) });
        if invalid {
            s.expect_failure("miopenExecuteFusionPlan", status, "an output descriptor other than the plan's");
        }
        if status != 0 {
            if !invalid {
                s.finding(format!("a compiled plan with every argument set failed to execute: {}", last_error()));
            }
            s.unchanged("miopenExecuteFusionPlan", &y, &before);
        } else {
            let mut want = want_from(&y);
            let out = TensorDesc::with_strides(DataType::Float, &cur_lens, &ys).unwrap();
            scatter(&out, &cur, &mut want);
            let mut scale = vec![0.0; want.len()];
            scatter(&out, &mag, &mut scale);
            s.matches_scaled("miopenExecuteFusionPlan", &y, &before, &want, &scale, 1e-5);
        }
        unsafe { miopenDestroyTensorDescriptor(yd) };
    }
    unsafe { miopenDestroyOperatorArgs(args) };
}

/// Logical (packed NCHW) values of a strided tensor.
fn packed_values(d: &TensorDesc, v: &[f64]) -> Vec<f64> {
    conflux::reference::strided::offsets(d).into_iter().map(|o| v[o]).collect()
}

/// Packed values into a strided tensor's positions.
fn scatter(d: &TensorDesc, packed: &[f64], out: &mut [f64]) {
    for (o, v) in conflux::reference::strided::offsets(d).into_iter().zip(packed) {
        out[o] = *v;
    }
}
