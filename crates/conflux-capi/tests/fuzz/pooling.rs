//! Fuzzed pooling forward: random 2-D windows, padding and strides (sometimes a padding the
//! window cannot cover, which MIOpen refuses), every mode, strided layouts, the saved indices of
//! max pooling requested or not; a success equals the f64 reference.

use super::conv::{c_tensor, space};
use super::harness::*;
use conflux::pooling::{PoolingDesc, PoolingMode};
use std::ptr::{null, null_mut};
use MIOpen::handle::MiopenHandle;
use MIOpen::pooling::*;
use MIOpen::tensor::*;

pub fn pooling(r: &mut Rng, s: &mut Stats, h: MiopenHandle) {
    let mode = r.range(0, 2) as i32;
    let win = [r.range(1, 4), r.range(1, 4)];
    let pad = [r.range(0, 2), r.range(0, 2)];
    let stride = [r.range(1, 3), r.range(1, 3)];
    let mut pd = null_mut();
    s.call("miopenCreatePoolingDescriptor", || unsafe { miopenCreatePoolingDescriptor(&mut pd) });
    let set = s.call("miopenSet2dPoolingDescriptor", || unsafe {
        miopenSet2dPoolingDescriptor(pd, mode, win[0] as i32, win[1] as i32, pad[0] as i32, pad[1] as i32, stride[0] as i32, stride[1] as i32)
    });
    let lens = [r.range(1, 2) as usize, r.range(1, 5) as usize, r.range(1, 9) as usize, r.range(1, 9) as usize];
    let xs = strides_for(r, &lens);
    let Some(xd) = c_tensor(s, &lens.map(|v| v as i64), &xs.iter().map(|v| *v as i64).collect::<Vec<_>>()) else { return };
    let mut out = [0i32; 4];
    let dims = if set == 0 {
        s.call("miopenGetPoolingForwardOutputDim", || unsafe { miopenGetPoolingForwardOutputDim(pd, xd, &mut out[0], &mut out[1], &mut out[2], &mut out[3]) })
    } else {
        set
    };
    let rust = PoolingDesc::new(PoolingMode::try_from(mode).unwrap(), &win, &pad, &stride);
    if (set == 0) != rust.is_ok() {
        s.finding(format!("the C and Rust pooling descriptors disagree on window {win:?} pad {pad:?} stride {stride:?}"));
    }
    if let (0, Ok(p)) = (dims, rust) {
        let yl: Vec<usize> = out.iter().map(|v| *v as usize).collect();
        let ys = strides_for(r, &yl);
        if let Some(yd) = c_tensor(s, &yl.iter().map(|v| *v as i64).collect::<Vec<_>>(), &ys.iter().map(|v| *v as i64).collect::<Vec<_>>()) {
            let mut x = HostBuf::filled(space(&lens, &xs), || r.small_int(8));
            let mut y = HostBuf::poisoned(space(&yl, &ys));
            let before = y.bits();
            let do_backward = mode == 0 && r.chance(0.5);
            let mut ws_bytes = 0usize;
            s.call("miopenPoolingGetWorkSpaceSizeV2", || unsafe { miopenPoolingGetWorkSpaceSizeV2(pd, yd, &mut ws_bytes) });
            let mut ws = HostBuf::poisoned(ws_bytes.div_ceil(4).max(1));
            let (px, py, pw) = (x.ptr(), y.ptr(), if do_backward { ws.ptr() } else { null_mut() });
            let wsz = if do_backward { ws_bytes } else { 0 };
            let status = s.call("miopenPoolingForward", || unsafe { miopenPoolingForward(h, pd, null(), xd, px, null(), yd, py, do_backward, pw, wsz) });
            if status != 0 {
                s.finding(format!("miopenPoolingForward refused a valid pooling: {}", last_error()));
                s.unchanged("miopenPoolingForward", &y, &before);
            } else {
                let mut want = want_from(&y);
                let (rx, ry) = (rust_desc(&lens, &xs), rust_desc(&yl, &ys));
                conflux::reference::pooling_forward(&p, (1.0, 0.0), &rx, &x.f64s(), &ry, &mut want).unwrap();
                // Averages of small integers over at most 16 elements: exact to f32 rounding.
                s.matches("miopenPoolingForward", &y, &before, &want, 1e-6);
            }
            unsafe { miopenDestroyTensorDescriptor(yd) };
        }
    }
    unsafe {
        miopenDestroyTensorDescriptor(xd);
        miopenDestroyPoolingDescriptor(pd);
    }
}
