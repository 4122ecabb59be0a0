//! Fuzzed convolutions through the C API: random small geometries (groups, padding, strides,
//! dilations, strided layouts), sometimes hostile (huge or negative sizes, a wrong output
//! descriptor, too little workspace), in the three directions through immediate mode, Find
//! and `miopenConvolutionForward` with a random algorithm, every success checked against the
//! f64 reference.

use super::harness::*;
use conflux::{ConvDesc, ConvMode};
use std::ptr::null_mut;
use MIOpen::conv::*;
use MIOpen::conv_run::backward_data::*;
use MIOpen::conv_run::backward_weights::*;
use MIOpen::conv_run::forward::*;
use MIOpen::conv_run::ConvSolutionC;
use MIOpen::handle::MiopenHandle;
use MIOpen::tensor::*;

/// A C f32 tensor descriptor from lengths and strides (its status is part of the run).
pub fn c_tensor(s: &mut Stats, lens: &[i64], strides: &[i64]) -> Option<MiopenTensor> {
    c_tensor_of(s, 1, lens, strides)
}

/// `c_tensor` of MIOpen data type `dtype`, from usize lengths and strides.
pub fn c_tensor_typed(s: &mut Stats, dtype: i32, lens: &[usize], strides: &[usize]) -> Option<MiopenTensor> {
    c_tensor_of(s, dtype, &as_i64(lens), &as_i64(strides))
}

fn c_tensor_of(s: &mut Stats, dtype: i32, lens: &[i64], strides: &[i64]) -> Option<MiopenTensor> {
    let mut t = null_mut();
    s.call("miopenCreateTensorDescriptor", || unsafe { miopenCreateTensorDescriptor(&mut t) });
    let (l, st): (Vec<i32>, Vec<i32>) = (lens.iter().map(|v| *v as i32).collect(), strides.iter().map(|v| *v as i32).collect());
    let status = s.call("miopenSetTensorDescriptor", || unsafe { miopenSetTensorDescriptor(t, dtype, l.len() as i32, l.as_ptr(), st.as_ptr()) });
    if status == 0 {
        Some(t)
    } else {
        unsafe { miopenDestroyTensorDescriptor(t) };
        None
    }
}

fn as_i64(v: &[usize]) -> Vec<i64> {
    v.iter().map(|x| *x as i64).collect()
}

/// Elements a strided tensor spans.
pub fn space(lens: &[usize], strides: &[usize]) -> usize {
    1 + lens.iter().zip(strides).map(|(l, s)| (l - 1) * s).sum::<usize>()
}

/// A 2-D or 3-D convolution: `hw`, `rs`, `pad`, `stride` and `dil` hold one value per spatial
/// dimension (3-D ones reach the folded paths of 1 × R × S and T × 1 × 1 filters).
#[derive(Debug)]
struct Geometry {
    n: usize,
    c: usize,
    hw: Vec<usize>,
    k: usize,
    rs: Vec<usize>,
    pad: Vec<i64>,
    stride: Vec<i64>,
    dil: Vec<i64>,
    groups: i64,
    /// Why the generator knows the request is invalid (None: valid, or for conflux to judge).
    invalid: Option<&'static str>,
}

fn geometry(r: &mut Rng) -> Geometry {
    let groups = r.pick(&[1, 1, 1, 2, 3]);
    let g = groups as usize;
    let nd = if r.chance(0.25) { 3 } else { 2 };
    // 3-D: smaller extents; filters often 1 along depth or along height and width (the folds).
    let (extent, shape) = (if nd == 3 { 5 } else { 8 }, r.range(0, 2));
    let filter = |r: &mut Rng, i: usize| match (nd, shape) {
        (3, 0) if i == 0 => 1,
        (3, 1) if i > 0 => 1,
        _ => r.range(1, 3) as usize,
    };
    let mut geo = Geometry {
        n: r.range(1, 2) as usize,
        c: g * r.range(1, 3) as usize,
        hw: (0..nd).map(|_| r.range(1, extent) as usize).collect(),
        k: g * r.range(1, 3) as usize,
        rs: (0..nd).map(|i| filter(r, i)).collect(),
        pad: (0..nd).map(|_| r.range(0, 2)).collect(),
        stride: (0..nd).map(|_| r.range(1, 3)).collect(),
        dil: (0..nd).map(|_| r.range(1, 2)).collect(),
        groups,
        invalid: None,
    };
    if r.chance(0.15) {
        // Valid but extreme: the output stays small, internal buffers must not explode.
        let huge = r.pick(&[1i64 << 30, (1i64 << 31) - 1, 1 << 20]);
        let axis = r.range(0, nd as i64 - 1) as usize;
        match r.range(0, 2) {
            0 => geo.pad[axis] = huge,
            1 => geo.stride[axis] = huge,
            _ => geo.dil[axis] = huge,
        }
    }
    if r.chance(0.05) {
        geo.pad[0] = -1;
        geo.invalid = Some("a negative padding");
    } else if r.chance(0.05) {
        geo.groups = geo.c as i64 + 1;
        geo.invalid = Some("a group count that divides neither C nor K");
    }
    geo
}

/// One fuzzed convolution in a random direction through a random entry point.
pub fn convolution(r: &mut Rng, s: &mut Stats, h: MiopenHandle) {
    let geo = geometry(r);
    if tracing() {
        eprintln!("  {geo:?}");
    }
    let mut conv = null_mut();
    s.call("miopenCreateConvolutionDescriptor", || unsafe { miopenCreateConvolutionDescriptor(&mut conv) });
    let status = if geo.hw.len() == 2 {
        s.call("miopenInitConvolutionDescriptor", || unsafe {
            miopenInitConvolutionDescriptor(conv, 0, geo.pad[0] as i32, geo.pad[1] as i32, geo.stride[0] as i32, geo.stride[1] as i32, geo.dil[0] as i32, geo.dil[1] as i32)
        })
    } else {
        let i32s = |v: &[i64]| v.iter().map(|&x| x as i32).collect::<Vec<i32>>();
        let (pad, stride, dil) = (i32s(&geo.pad), i32s(&geo.stride), i32s(&geo.dil));
        s.call("miopenInitConvolutionNdDescriptor", || unsafe { miopenInitConvolutionNdDescriptor(conv, 3, pad.as_ptr(), stride.as_ptr(), dil.as_ptr(), 0) })
    };
    let status = if status == 0 { s.call("miopenSetConvolutionGroupCount", || unsafe { miopenSetConvolutionGroupCount(conv, geo.groups as i32) }) } else { status };
    if status == 0 {
        run_with(r, s, h, &geo, conv);
    } else if geo.invalid.is_none() {
        s.finding(format!("a valid convolution descriptor was refused: {}", last_error()));
    }
    unsafe { miopenDestroyConvolutionDescriptor(conv) };
}

fn run_with(r: &mut Rng, s: &mut Stats, h: MiopenHandle, geo: &Geometry, conv: MiopenConv) {
    let xl: Vec<usize> = [geo.n, geo.c].into_iter().chain(geo.hw.iter().copied()).collect();
    let cg = (geo.c as i64 / geo.groups.max(1)).max(1) as usize;
    let wl: Vec<usize> = [geo.k, cg].into_iter().chain(geo.rs.iter().copied()).collect();
    let (xs, ws) = (strides_for(r, &xl), strides_for(r, &wl));
    let (Some(xd), Some(wd)) = (c_tensor(s, &as_i64(&xl), &as_i64(&xs)), c_tensor(s, &as_i64(&wl), &as_i64(&ws))) else {
        s.finding("small valid tensors were refused".into());
        return;
    };
    let mut out = vec![0i32; xl.len()];
    let (name, status) = if xl.len() == 4 {
        ("miopenGetConvolutionForwardOutputDim", s.call("miopenGetConvolutionForwardOutputDim", || unsafe {
            miopenGetConvolutionForwardOutputDim(conv, xd, wd, &mut out[0], &mut out[1], &mut out[2], &mut out[3])
        }))
    } else {
        let mut nd = 0i32;
        let status = s.call("miopenGetConvolutionNdForwardOutputDim", || unsafe { miopenGetConvolutionNdForwardOutputDim(conv, xd, wd, &mut nd, out.as_mut_ptr()) });
        if status == 0 && nd as usize != xl.len() {
            s.finding(format!("miopenGetConvolutionNdForwardOutputDim gave {nd} dimensions for a {}-D input", xl.len()));
        }
        ("miopenGetConvolutionNdForwardOutputDim", status)
    };
    if let Some(why) = geo.invalid {
        s.expect_failure(name, status, why);
    }
    if status == 0 {
        let mut yl: Vec<usize> = out.iter().map(|v| *v as usize).collect();
        // A huge padding with a small stride is valid and has a huge output: no buffer for it.
        if yl.iter().try_fold(1usize, |a, l| a.checked_mul(*l)).is_none_or(|n| n > 1 << 20) {
            unsafe {
                miopenDestroyTensorDescriptor(xd);
                miopenDestroyTensorDescriptor(wd);
            }
            return;
        }
        let mut invalid = geo.invalid;
        if r.chance(0.08) {
            *yl.last_mut().expect("a spatial dimension") += 1;
            invalid = Some("an output descriptor of the wrong width");
        }
        let ys = strides_for(r, &yl);
        if let Some(yd) = c_tensor(s, &as_i64(&yl), &as_i64(&ys)) {
            let tensors = Tensors { xl: xl.clone(), xs, wl: wl.clone(), ws, yl, ys, xd, wd, yd };
            let rust = ConvDesc::new(ConvMode::Convolution, &geo.pad, &geo.stride, &geo.dil).and_then(|mut c| c.set_groups(geo.groups).map(|_| c));
            match rust {
                Ok(rc) => direction(r, s, h, conv, &rc, &tensors, invalid),
                Err(e) => s.finding(format!("the C API accepted a convolution the Rust API refuses: {e}")),
            }
            unsafe { miopenDestroyTensorDescriptor(yd) };
        }
    }
    unsafe {
        miopenDestroyTensorDescriptor(xd);
        miopenDestroyTensorDescriptor(wd);
    }
}

pub struct Tensors {
    pub xl: Vec<usize>,
    pub xs: Vec<usize>,
    pub wl: Vec<usize>,
    pub ws: Vec<usize>,
    pub yl: Vec<usize>,
    pub ys: Vec<usize>,
    pub xd: MiopenTensor,
    pub wd: MiopenTensor,
    pub yd: MiopenTensor,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Dir {
    Forward,
    BackwardData,
    BackwardWeights,
}

fn direction(r: &mut Rng, s: &mut Stats, h: MiopenHandle, conv: MiopenConv, rc: &ConvDesc, t: &Tensors, invalid: Option<&'static str>) {
    let dir = r.pick(&[Dir::Forward, Dir::BackwardData, Dir::BackwardWeights]);
    let (xn, wn, yn) = (space(&t.xl, &t.xs), space(&t.wl, &t.ws), space(&t.yl, &t.ys));
    let mut x = HostBuf::filled(xn, || r.small_int(2));
    let mut w = HostBuf::filled(wn, || r.small_int(2));
    let mut y = HostBuf::filled(yn, || r.small_int(2));
    // The output starts poisoned; the inputs hold data.
    let out = match dir {
        Dir::Forward => &mut y,
        Dir::BackwardData => &mut x,
        Dir::BackwardWeights => &mut w,
    };
    *out = HostBuf::poisoned(out.body().len());
    let before = out.bits();
    let (rx, rw, ry) = (rust_desc(&t.xl, &t.xs), rust_desc(&t.wl, &t.ws), rust_desc(&t.yl, &t.ys));
    let mut want = match dir {
        Dir::Forward => want_from(&y),
        Dir::BackwardData => want_from(&x),
        Dir::BackwardWeights => want_from(&w),
    };
    let entry = r.range(0, 2);
    if tracing() {
        eprintln!("  {dir:?} entry {entry}: x {:?}/{:?} w {:?}/{:?} y {:?}/{:?}", t.xl, t.xs, t.wl, t.ws, t.yl, t.ys);
    }
    let (name, status, scale) = match entry {
        0 => immediate(r, s, h, conv, t, dir, (&mut x, &mut w, &mut y), invalid),
        1 => super::conv_find::find_then_run(r, s, h, conv, t, dir, (&mut x, &mut w, &mut y), invalid),
        _ => super::conv_find::find2(s, h, conv, t, dir, (&mut x, &mut w, &mut y), invalid),
    };
    let Some(status) = status else { return };
    let out = match dir {
        Dir::Forward => &y,
        Dir::BackwardData => &x,
        Dir::BackwardWeights => &w,
    };
    if status != 0 {
        s.unchanged(name, out, &before);
        return;
    }
    let (xv, wv, yv) = (x.f64s(), w.f64s(), y.f64s());
    let reference = match dir {
        Dir::Forward => conflux::reference::conv_forward(rc, &rx, &xv, &rw, &wv, &ry, &mut want),
        Dir::BackwardData => conflux::reference::conv_backward_data(rc, &ry, &yv, &rw, &wv, &rx, &mut want),
        Dir::BackwardWeights => conflux::reference::conv_backward_weights(rc, &ry, &yv, &rx, &xv, &rw, &mut want),
    };
    match reference {
        // Small integers and power-of-two scales: every sum is exact in f32. The entry
        // point's scaling of the result: α, or α + β after a Find that wrote it first.
        Ok(()) => {
            want.iter_mut().filter(|v| !v.is_nan()).for_each(|v| *v *= scale);
            s.matches(name, out, &before, &want, 0.0)
        }
        Err(e) => s.finding(format!("{name} succeeded where the reference refuses: {e}")),
    }
}

pub type Bufs<'a> = (&'a mut HostBuf, &'a mut HostBuf, &'a mut HostBuf);

/// Immediate mode: list the solutions, run one (sometimes with one byte too little workspace).
/// Returns the call's name, its status (None: nothing ran) and the result's scale.
#[allow(clippy::too_many_arguments)]
fn immediate(r: &mut Rng, s: &mut Stats, h: MiopenHandle, conv: MiopenConv, t: &Tensors, dir: Dir, (x, w, y): Bufs, invalid: Option<&'static str>) -> (&'static str, Option<i32>, f64) {
    let mut sols = [ConvSolutionC::default(); 8];
    let mut count = 0usize;
    let name = match dir {
        Dir::Forward => "miopenConvolutionForwardGetSolution",
        Dir::BackwardData => "miopenConvolutionBackwardDataGetSolution",
        Dir::BackwardWeights => "miopenConvolutionBackwardWeightsGetSolution",
    };
    let status = s.call(name, || unsafe {
        match dir {
            Dir::Forward => miopenConvolutionForwardGetSolution(h, t.wd, t.xd, conv, t.yd, 8, &mut count, sols.as_mut_ptr()),
            Dir::BackwardData => miopenConvolutionBackwardDataGetSolution(h, t.yd, t.wd, conv, t.xd, 8, &mut count, sols.as_mut_ptr()),
            Dir::BackwardWeights => miopenConvolutionBackwardWeightsGetSolution(h, t.yd, t.xd, conv, t.wd, 8, &mut count, sols.as_mut_ptr()),
        }
    });
    if let Some(why) = invalid {
        s.expect_failure(name, status, why);
    }
    if status != 0 || count == 0 {
        return (name, None, 1.0);
    }
    let sol = sols[r.range(0, count as i64 - 1) as usize];
    if sol.workspace_size > MAX_WORKSPACE {
        s.finding(format!("{dir:?}: solution {} asks for {} workspace bytes", sol.solution_id, sol.workspace_size));
        return (name, None, 1.0);
    }
    let short = sol.workspace_size > 0 && r.chance(0.2);
    let ws_bytes = if short { sol.workspace_size - 1 } else { sol.workspace_size };
    let mut ws = HostBuf::poisoned(ws_bytes.div_ceil(4));
    let ws_ptr = if ws_bytes == 0 { null_mut() } else { ws.ptr() };
    let (px, pw, py) = (x.ptr(), w.ptr(), y.ptr());
    let name = match dir {
        Dir::Forward => "miopenConvolutionForwardImmediate",
        Dir::BackwardData => "miopenConvolutionBackwardDataImmediate",
        Dir::BackwardWeights => "miopenConvolutionBackwardWeightsImmediate",
    };
    let status = s.call(name, || unsafe {
        match dir {
            Dir::Forward => miopenConvolutionForwardImmediate(h, t.wd, pw, t.xd, px, conv, t.yd, py, ws_ptr, ws_bytes, sol.solution_id),
            Dir::BackwardData => miopenConvolutionBackwardDataImmediate(h, t.yd, py, t.wd, pw, conv, t.xd, px, ws_ptr, ws_bytes, sol.solution_id),
            Dir::BackwardWeights => miopenConvolutionBackwardWeightsImmediate(h, t.yd, py, t.xd, px, conv, t.wd, pw, ws_ptr, ws_bytes, sol.solution_id),
        }
    });
    if short {
        s.expect_failure(name, status, "less workspace than the solution needs");
    }
    (name, Some(status), 1.0)
}
