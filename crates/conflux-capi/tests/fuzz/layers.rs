//! Fuzzed element-wise and layer calls (activation, softmax), fusion plans of random op
//! orders, and hostile descriptor setters.

use super::conv::{c_tensor, space};
use super::harness::*;
use conflux::reference::strided::offsets;
use conflux::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use conflux::{ActivationDesc, ActivationMode};
use std::ptr::{null, null_mut};
use MIOpen::activation::*;
use MIOpen::conv::*;
use MIOpen::fusion::*;
use MIOpen::handle::MiopenHandle;
use MIOpen::softmax::*;
use MIOpen::tensor::*;

fn small_lens(r: &mut Rng, rank: usize) -> Vec<usize> {
    (0..rank).map(|_| r.range(1, if rank > 5 { 2 } else { 4 }) as usize).collect()
}

fn as_i64(v: &[usize]) -> Vec<i64> {
    v.iter().map(|x| *x as i64).collect()
}

/// Activation forward over ranks 1–8 in strided layouts, sometimes with mismatched tensors.
pub fn activation(r: &mut Rng, s: &mut Stats, h: MiopenHandle) {
    let rank = r.range(1, 8) as usize;
    let lens = small_lens(r, rank);
    let mut ylens = lens.clone();
    let mut invalid = None;
    if r.chance(0.1) {
        ylens[0] += 1;
        invalid = Some("x and y of different lengths");
    }
    let (xs, ys) = (strides_for(r, &lens), strides_for(r, &ylens));
    let modes = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 101, 102, 103, 104, 105];
    let mode = if r.chance(0.05) { 42 } else { r.pick(&modes) };
    let (a, b, g) = (r.range(0, 4) as f64 * 0.5, r.range(0, 4) as f64 * 0.5, r.range(1, 3) as f64);
    let mut act = null_mut();
    s.call("miopenCreateActivationDescriptor", || unsafe { miopenCreateActivationDescriptor(&mut act) });
    let st = s.call("miopenSetActivationDescriptor", || unsafe { miopenSetActivationDescriptor(act, mode, a, b, g) });
    if mode == 42 {
        s.expect_failure("miopenSetActivationDescriptor", st, "an undefined activation mode");
    }
    if let (Some(xd), Some(yd)) = (c_tensor(s, &as_i64(&lens), &as_i64(&xs)), c_tensor(s, &as_i64(&ylens), &as_i64(&ys))) {
        let mut x = HostBuf::filled(space(&lens, &xs), || r.range(-64, 64) as f32 / 16.0);
        let mut y = HostBuf::poisoned(space(&ylens, &ys));
        let before = y.bits();
        let null_x = r.chance(0.03);
        let px = if null_x { null_mut() } else { x.ptr() };
        let py = y.ptr();
        let status = s.call("miopenActivationForward", || unsafe { miopenActivationForward(h, act, null(), xd, px, null(), yd, py) });
        if null_x {
            s.expect_failure("miopenActivationForward", status, "a NULL x");
        } else if let Some(why) = invalid {
            s.expect_failure("miopenActivationForward", status, why);
        }
        if status != 0 {
            s.unchanged("miopenActivationForward", &y, &before);
        } else if let Some(m) = ActivationMode::from_i32(mode) {
            let d = ActivationDesc::new(m, a, b, g);
            let mut want = want_from(&y);
            let (xv, rx, ry) = (x.f64s(), rust_desc(&lens, &xs), rust_desc(&ylens, &ys));
            for (xo, yo) in offsets(&rx).into_iter().zip(offsets(&ry)) {
                want[yo] = d.forward(xv[xo]);
            }
            s.matches("miopenActivationForward", &y, &before, &want, 1e-5);
        }
        unsafe {
            miopenDestroyTensorDescriptor(xd);
            miopenDestroyTensorDescriptor(yd);
        }
    }
    unsafe { miopenDestroyActivationDescriptor(act) };
}

/// Softmax forward (V2: every algorithm and mode) against the reference.
pub fn softmax(r: &mut Rng, s: &mut Stats, h: MiopenHandle) {
    let rank = r.range(2, 5) as usize;
    let lens = small_lens(r, rank);
    let (xs, ys) = (strides_for(r, &lens), strides_for(r, &lens));
    let (algo, mode) = (r.range(0, 2) as i32, r.range(0, 1) as i32);
    let (Some(xd), Some(yd)) = (c_tensor(s, &as_i64(&lens), &as_i64(&xs)), c_tensor(s, &as_i64(&lens), &as_i64(&ys))) else {
        return;
    };
    let mut x = HostBuf::filled(space(&lens, &xs), || r.range(-32, 32) as f32 / 8.0);
    let mut y = HostBuf::poisoned(space(&lens, &ys));
    let before = y.bits();
    let (one, zero) = (1.0f32, 0.0f32);
    let (px, py) = (x.ptr(), y.ptr());
    let status = s.call("miopenSoftmaxForward_V2", || unsafe {
        miopenSoftmaxForward_V2(h, (&one as *const f32).cast(), xd, px, (&zero as *const f32).cast(), yd, py, algo, mode)
    });
    if status != 0 {
        s.finding(format!("miopenSoftmaxForward_V2 refused a valid {rank}-D softmax: {}", last_error()));
        s.unchanged("miopenSoftmaxForward_V2", &y, &before);
    } else {
        let mut want = want_from(&y);
        let (a, m) = (SoftmaxAlgorithm::try_from(algo).unwrap(), SoftmaxMode::try_from(mode).unwrap());
        conflux::reference::softmax_forward(a, m, (1.0, 0.0), &rust_desc(&lens, &xs), &x.f64s(), &rust_desc(&lens, &ys), &mut want).unwrap();
        s.matches("miopenSoftmaxForward_V2", &y, &before, &want, 1e-5);
    }
    unsafe {
        miopenDestroyTensorDescriptor(xd);
        miopenDestroyTensorDescriptor(yd);
    }
}

/// A fusion plan of 1–4 ops in a random order (a convolution, bias, activation, batch-norm
/// inference): compile answers with a status, and a plan that compiles and executes must
/// compute the chain the ops describe, in their order.
pub fn fusion(r: &mut Rng, s: &mut Stats, h: MiopenHandle) {
    let (n, c, hw) = (r.range(1, 2) as usize, r.range(1, 4) as usize, r.range(1, 5) as usize);
    let k = r.range(1, 4) as usize;
    let lens = [n, c, hw, hw];
    let xs = strides_for(r, &lens);
    let Some(xd) = c_tensor(s, &as_i64(&lens), &as_i64(&xs)) else { return };
    let mut plan = null_mut();
    s.call("miopenCreateFusionPlan", || unsafe { miopenCreateFusionPlan(&mut plan, 0, xd) });
    let kinds: Vec<u8> = (0..r.range(1, 4)).map(|_| r.range(0, 3) as u8).collect();
    let mut channels = c;
    let mut ops = Vec::new();
    let mut descs = vec![xd];
    let conv_desc = {
        let mut d = null_mut();
        s.call("miopenCreateConvolutionDescriptor", || unsafe { miopenCreateConvolutionDescriptor(&mut d) });
        s.call("miopenInitConvolutionDescriptor", || unsafe { miopenInitConvolutionDescriptor(d, 0, 1, 1, 1, 1, 1, 1) });
        d
    };
    let act_mode = r.pick(&[3, 1, 8, 100]);
    for kind in &kinds {
        let mut op = null_mut();
        let status = match kind {
            0 => {
                let Some(wd) = c_tensor(s, &[k as i64, channels as i64, 3, 3], &[9 * channels as i64, 9, 3, 1]) else { return };
                descs.push(wd);
                let st = s.call("miopenCreateOpConvForward", || unsafe { miopenCreateOpConvForward(plan, &mut op, conv_desc, wd) });
                if st == 0 {
                    channels = k;
                }
                st
            }
            1 => {
                let Some(bd) = c_tensor(s, &[1, channels as i64, 1, 1], &[channels as i64, 1, 1, 1]) else { return };
                descs.push(bd);
                s.call("miopenCreateOpBiasForward", || unsafe { miopenCreateOpBiasForward(plan, &mut op, bd) })
            }
            2 => s.call("miopenCreateOpActivationForward", || unsafe { miopenCreateOpActivationForward(plan, &mut op, act_mode) }),
            _ => {
                let Some(pd) = c_tensor(s, &[1, channels as i64, 1, 1], &[channels as i64, 1, 1, 1]) else { return };
                descs.push(pd);
                s.call("miopenCreateOpBatchNormInference", || unsafe { miopenCreateOpBatchNormInference(plan, &mut op, 1, pd) })
            }
        };
        ops.push((*kind, op, status, channels));
    }
    let added: Vec<_> = ops.iter().filter(|o| o.2 == 0).cloned().collect();
    let status = s.call("miopenCompileFusionPlan", || unsafe { miopenCompileFusionPlan(h, plan) });
    if status == 0 && !added.is_empty() {
        super::fusion_run::execute(r, s, h, plan, xd, &lens, &xs, &added, act_mode, k);
    }
    unsafe {
        miopenDestroyFusionPlan(plan);
        miopenDestroyConvolutionDescriptor(conv_desc);
        for d in descs {
            miopenDestroyTensorDescriptor(d);
        }
    }
}

/// Tensor descriptor setters with hostile arguments: a status for each, and a descriptor that
/// was accepted reads back as given.
pub fn descriptors(r: &mut Rng, s: &mut Stats) {
    let rank = r.range(-1, 9);
    let n = rank.max(0) as usize;
    let pick_len = |r: &mut Rng| r.pick(&[1i64, 2, 3, 7, 0, -1, i32::MAX as i64, 1 << 20]);
    let lens: Vec<i32> = (0..n.max(1)).map(|_| pick_len(r) as i32).collect();
    let strides: Vec<i32> = (0..n.max(1)).map(|_| pick_len(r) as i32).collect();
    let dtype = r.pick(&[0, 1, 2, 3, 5, 6, 9, 4, 77, -1]);
    let mut t = null_mut();
    s.call("miopenCreateTensorDescriptor", || unsafe { miopenCreateTensorDescriptor(&mut t) });
    let with_strides = r.chance(0.5);
    let sp = if with_strides { strides.as_ptr() } else { null() };
    let status = s.call("miopenSetTensorDescriptor", || unsafe { miopenSetTensorDescriptor(t, dtype, rank as i32, lens.as_ptr(), sp) });
    let hostile = rank <= 0 || lens[..n.max(1)].iter().any(|l| *l <= 0) || (with_strides && strides[..n.max(1)].iter().any(|v| *v <= 0)) || [4, 77, -1].contains(&dtype);
    if hostile {
        s.expect_failure("miopenSetTensorDescriptor", status, "a rank, length, stride or type MIOpen refuses");
    }
    if status == 0 {
        let mut size = 0;
        s.call("miopenGetTensorDescriptorSize", || unsafe { miopenGetTensorDescriptorSize(t, &mut size) });
        let (mut dt, mut dims, mut st) = (0, vec![0i32; n.max(1)], vec![0i32; n.max(1)]);
        let got = s.call("miopenGetTensorDescriptor", || unsafe { miopenGetTensorDescriptor(t, &mut dt, dims.as_mut_ptr(), st.as_mut_ptr()) });
        if got != 0 {
            // Strides past INT_MAX cannot be reported: a clean failure must write nothing.
            if dt != 0 || dims.iter().chain(&st).any(|v| *v != 0) {
                s.finding("miopenGetTensorDescriptor failed but wrote its outputs".into());
            }
        } else if size != rank as i32 || dt != dtype || dims[..n] != lens[..n] || (with_strides && st[..n] != strides[..n]) {
            s.finding(format!("a descriptor set to rank {rank} lens {lens:?} reads back as rank {size} lens {dims:?}"));
        }
        let mut bytes = 0usize;
        s.call("miopenGetTensorNumBytes", || unsafe { miopenGetTensorNumBytes(t, &mut bytes) });
    }
    unsafe { miopenDestroyTensorDescriptor(t) };
}
