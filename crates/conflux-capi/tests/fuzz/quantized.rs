//! Fuzzed int8 and fp8 convolutions (issue 34) through the C API: random small geometries,
//! layouts, output types and fp8 rounding modes, Find then `miopenConvolutionForward` with α/β,
//! or immediate mode; sometimes invalid (a backward direction, mixed int8 / fp8 operands, an
//! output type the input does not allow). Inputs are small integers (fp8 holds them exactly)
//! and α / β powers of two or small integers, so every sum is exact and each output one
//! rounding of an exact value: a success must equal the f64 reference bit for bit.

use super::conv::{c_tensor_typed, space};
use super::harness::*;
use conflux::element::{decode, encode};
use conflux::{ConvDesc, ConvMode, DataType, TensorDesc};
use std::ffi::c_void;
use std::ptr::null_mut;
use MIOpen::conv::*;
use MIOpen::conv_run::backward_data::*;
use MIOpen::conv_run::forward::*;
use MIOpen::conv_run::{ConvAlgoPerf, ConvSolutionC};
use MIOpen::handle::MiopenHandle;
use MIOpen::tensor::*;

const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xa5;

/// A byte buffer of some element type with guard zones on both sides.
struct Bytes {
    data: Vec<u8>,
    len: usize,
}

impl Bytes {
    fn of(dt: DataType, values: &[f64]) -> Bytes {
        let body = encode(dt, values);
        let len = body.len();
        let mut data = vec![GUARD_BYTE; len + 2 * GUARD];
        data[GUARD..GUARD + len].copy_from_slice(&body);
        Bytes { data, len }
    }
    fn ptr(&mut self) -> *mut c_void { self.data[GUARD..].as_mut_ptr().cast() }
    fn body(&self) -> &[u8] { &self.data[GUARD..GUARD + self.len] }
    fn guards_intact(&self) -> bool { self.data[..GUARD].iter().chain(&self.data[GUARD + self.len..]).all(|&b| b == GUARD_BYTE) }
}

/// MIOpen's number of a data type.
fn c_type(dt: DataType) -> i32 {
    match dt {
        DataType::Half => 0,
        DataType::Float => 1,
        DataType::Int32 => 2,
        DataType::Int8 => 3,
        DataType::BFloat16 => 5,
        DataType::Float8 => 7,
        _ => 8,
    }
}

/// Small integers for a tensor of `dt` (fp8 holds −6..6 exactly; int8 its whole range).
fn values(r: &mut Rng, dt: DataType, n: usize) -> Vec<f64> {
    let lim = if dt == DataType::Int8 { 128 } else { 6 };
    (0..n).map(|_| r.range(-lim, lim.min(127)) as f64).collect()
}

pub fn convolution(r: &mut Rng, s: &mut Stats, h: MiopenHandle) {
    use DataType::*;
    let g = r.pick(&[1usize, 1, 2]);
    let cg = r.pick(&[1usize, 2, 3, 4, 8, 16]);
    let (c, k) = (g * cg, g * r.range(1, 9) as usize);
    let n = r.range(1, 2) as usize;
    let (hh, ww) = (r.range(1, 9) as usize, r.pick(&[1usize, 5, 12, 17, 20]));
    let (fh, fw) = (r.range(1, 3) as usize, r.range(1, 3) as usize);
    let (pad, stride, dil) = ([r.range(0, 2), r.range(0, 2)], [r.range(1, 2), r.range(1, 2)], [r.range(1, 2), r.range(1, 2)]);
    let int8 = r.chance(0.5);
    let f8 = |r: &mut Rng| r.pick(&[Float8, BFloat8]);
    let (mut xt, mut wt) = if int8 { (Int8, Int8) } else { (f8(r), f8(r)) };
    let mut yt = if int8 { r.pick(&[Int32, Float, Half, BFloat16, Int8]) } else { r.pick(&[Float, Half, BFloat16, Float8, BFloat8]) };
    let mut invalid = None;
    match r.range(0, 19) {
        0 => {
            wt = if int8 { Float8 } else { Int8 };
            invalid = Some("int8 and fp8 operands mixed");
        }
        1 => {
            yt = if int8 { Float8 } else { Int32 };
            invalid = Some("an output type the inputs do not allow");
        }
        2 => {
            xt = Half;
            invalid = Some("a Half x with 8-bit w");
        }
        _ => {}
    }
    let backward = r.chance(0.05);
    if backward {
        invalid = Some("a backward-data int8 / fp8 convolution");
    }
    let mut conv = null_mut();
    s.call("miopenCreateConvolutionDescriptor", || unsafe { miopenCreateConvolutionDescriptor(&mut conv) });
    let mut status = s.call("miopenInitConvolutionDescriptor", || unsafe {
        miopenInitConvolutionDescriptor(conv, 0, pad[0] as i32, pad[1] as i32, stride[0] as i32, stride[1] as i32, dil[0] as i32, dil[1] as i32)
    });
    let rounding = r.range(0, 1);
    if status == 0 {
        status = s.call("miopenSetConvolutionGroupCount", || unsafe { miopenSetConvolutionGroupCount(conv, g as i32) });
        status |= s.call("miopenSetConvolutionAttribute", || unsafe { miopenSetConvolutionAttribute(conv, 2, rounding as i32) });
    }
    let out = |l: usize, f: usize, p: i64, st: i64, d: i64| (l as i64 + 2 * p - d * (f as i64 - 1) - 1).div_euclid(st) + 1;
    let (oh, ow) = (out(hh, fh, pad[0], stride[0], dil[0]), out(ww, fw, pad[1], stride[1], dil[1]));
    if status != 0 || oh < 1 || ow < 1 {
        unsafe { miopenDestroyConvolutionDescriptor(conv) };
        return;
    }
    let (xl, wl, yl) = ([n, c, hh, ww], [k, cg, fh, fw], [n, k, oh as usize, ow as usize]);
    let (xs, ws, ys) = (strides_for(r, &xl), strides_for(r, &wl), strides_for(r, &yl));
    let descs = [(xt, &xl, &xs), (wt, &wl, &ws), (yt, &yl, &ys)].map(|(t, l, st)| c_tensor_typed(s, c_type(t), l, st));
    if let [Some(xd), Some(wd), Some(yd)] = descs {
        if tracing() {
            eprintln!("  quantized {xt:?}×{wt:?}→{yt:?} x {xl:?}/{xs:?} w {wl:?}/{ws:?} y {yl:?}/{ys:?} g {g} pad {pad:?} stride {stride:?} dil {dil:?} rounding {rounding}");
        }
        let tensors = [(xt, &xl, &xs), (wt, &wl, &ws), (yt, &yl, &ys)].map(|(t, l, st)| {
            let vals = values(r, t, space(l, st));
            (TensorDesc::with_strides(t, l, st).ok(), Bytes::of(t, &vals))
        });
        let rust = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &dil).and_then(|mut cd| {
            cd.set_groups(g as i64)?;
            cd.set_attribute(conflux::types::ConvAttrib::Fp8RoundingMode, rounding)?;
            Ok(cd)
        });
        match rust {
            Ok(rc) => run(r, s, h, conv, [xd, wd, yd], &rc, tensors, invalid, backward),
            Err(e) => s.finding(format!("the C API accepted a convolution the Rust API refuses: {e}")),
        }
    }
    for d in descs.into_iter().flatten() {
        unsafe { miopenDestroyTensorDescriptor(d) };
    }
    unsafe { miopenDestroyConvolutionDescriptor(conv) };
}

type Tensor = (Option<TensorDesc>, Bytes);

#[allow(clippy::too_many_arguments)]
fn run(r: &mut Rng, s: &mut Stats, h: MiopenHandle, conv: MiopenConv, [xd, wd, yd]: [MiopenTensor; 3], rc: &ConvDesc, [mut x, mut w, mut y]: [Tensor; 3], invalid: Option<&str>, backward: bool) {
    let before = y.1.body().to_vec();
    let (px, pw, py) = (x.1.ptr(), w.1.ptr(), y.1.ptr());
    if backward {
        let (one, zero) = (1f32, 0f32);
        let (pa, pb) = ((&one as *const f32).cast::<c_void>(), (&zero as *const f32).cast::<c_void>());
        let name = "miopenConvolutionBackwardData";
        let status = s.call(name, || unsafe { miopenConvolutionBackwardData(h, pa, yd, py, wd, pw, conv, 0, pb, xd, px, null_mut(), 0) });
        s.expect_failure(name, status, invalid.unwrap_or("backward"));
        return;
    }
    let (name, status, alpha, beta, old) = if r.chance(0.5) {
        let mut perf = [ConvAlgoPerf::default(); 4];
        let mut returned = 0;
        let status = s.call("miopenFindConvolutionForwardAlgorithm", || unsafe {
            miopenFindConvolutionForwardAlgorithm(h, xd, px, wd, pw, conv, yd, py, 4, &mut returned, perf.as_mut_ptr(), null_mut(), 0, false)
        });
        if let Some(why) = invalid {
            s.expect_failure("miopenFindConvolutionForwardAlgorithm", status, why);
        }
        if status != 0 {
            check_unchanged(s, "miopenFindConvolutionForwardAlgorithm", &y.1, &before);
            return;
        }
        // Find wrote y; the algorithm call then blends fresh old values with α and β.
        let vals = values(r, y.0.as_ref().map_or(DataType::Float, |d| d.dtype()), space_of(&y.0));
        y.1 = Bytes::of(y.0.as_ref().unwrap().dtype(), &vals);
        let py = y.1.ptr();
        let (alpha, beta) = (r.pick(&[1.0f32, 0.5, 3.0, 1.0 / 256.0]), r.pick(&[0.0f32, 1.0, -2.0]));
        let (pa, pb) = ((&alpha as *const f32).cast::<c_void>(), (&beta as *const f32).cast::<c_void>());
        let algo = perf[r.range(0, returned.max(1) as i64 - 1) as usize].algo;
        let name = "miopenConvolutionForward";
        let old = y.1.body().to_vec();
        (name, s.call(name, || unsafe { miopenConvolutionForward(h, pa, xd, px, wd, pw, conv, algo, pb, yd, py, null_mut(), 0) }), alpha, beta, old)
    } else {
        let mut sols = [ConvSolutionC::default(); 8];
        let mut count = 0usize;
        let status = s.call("miopenConvolutionForwardGetSolution", || unsafe { miopenConvolutionForwardGetSolution(h, wd, xd, conv, yd, 8, &mut count, sols.as_mut_ptr()) });
        if let Some(why) = invalid {
            s.expect_failure("miopenConvolutionForwardGetSolution", status, why);
        }
        if status != 0 || count == 0 {
            return;
        }
        let sol = sols[r.range(0, count as i64 - 1) as usize];
        let name = "miopenConvolutionForwardImmediate";
        (name, s.call(name, || unsafe { miopenConvolutionForwardImmediate(h, wd, pw, xd, px, conv, yd, py, null_mut(), 0, sol.solution_id) }), 1.0, 0.0, before)
    };
    if let Some(why) = invalid {
        s.expect_failure(name, status, why);
    }
    if status != 0 {
        check_unchanged(s, name, &y.1, &old);
        return;
    }
    let (Some(xdesc), Some(wdesc), Some(ydesc)) = (&x.0, &w.0, &y.0) else {
        s.finding(format!("{name} succeeded on descriptors the Rust API refuses"));
        return;
    };
    let dec = |t: &TensorDesc, b: &[u8]| decode(t.dtype(), b);
    let mut want = dec(ydesc, &old);
    if let Err(e) = conflux::reference::quantized_conv_forward(alpha as f64, beta as f64, rc, xdesc, &dec(xdesc, x.1.body()), wdesc, &dec(wdesc, w.1.body()), &mut [], ydesc, &mut want) {
        s.finding(format!("{name} succeeded where the reference refuses: {e}"));
        return;
    }
    *s.checked.entry(format!("{name} (int8 / fp8)")).or_default() += 1;
    let got = dec(ydesc, y.1.body());
    if !y.1.guards_intact() {
        s.finding(format!("{name} wrote outside its output"));
    } else if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b && !(a.is_nan() && b.is_nan())) {
        s.finding(format!("{name} {:?}: element {i} is {}, the reference {}", ydesc.dtype(), got[i], want[i]));
    }
}

fn space_of(d: &Option<TensorDesc>) -> usize { d.as_ref().map_or(0, |d| d.element_space()) }

fn check_unchanged(s: &mut Stats, name: &str, out: &Bytes, before: &[u8]) {
    if !out.guards_intact() {
        s.finding(format!("{name} wrote outside its output"));
    } else if out.body() != before {
        s.finding(format!("{name} failed but wrote its output"));
    }
}
