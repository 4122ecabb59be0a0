//! The searching entry points of a fuzzed convolution: Find 1.0 followed by the algorithm
//! call with α/β, and Find 2.0 (a problem, its solutions, one run).

use super::conv::{Bufs, Dir, Tensors};
use super::harness::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use MIOpen::conv::MiopenConv;
use MIOpen::conv_run::backward_data::*;
use MIOpen::conv_run::backward_weights::*;
use MIOpen::conv_run::forward::*;
use MIOpen::conv_run::ConvAlgoPerf;
use MIOpen::find2::*;
use MIOpen::handle::MiopenHandle;

/// Find (which writes the output with conv(·)), then the algorithm call with α and β on top
/// of it: the result is (α + β)·conv(·). Returns the second call's name and status.
#[allow(clippy::too_many_arguments)]
pub fn find_then_run(r: &mut Rng, s: &mut Stats, h: MiopenHandle, conv: MiopenConv, t: &Tensors, dir: Dir, (x, w, y): Bufs, invalid: Option<&'static str>) -> (&'static str, Option<i32>, f64) {
    let mut ws_bytes = 0usize;
    let status = s.call("GetWorkSpaceSize", || unsafe {
        match dir {
            Dir::Forward => miopenConvolutionForwardGetWorkSpaceSize(h, t.wd, t.xd, conv, t.yd, &mut ws_bytes),
            Dir::BackwardData => miopenConvolutionBackwardDataGetWorkSpaceSize(h, t.yd, t.wd, conv, t.xd, &mut ws_bytes),
            Dir::BackwardWeights => miopenConvolutionBackwardWeightsGetWorkSpaceSize(h, t.yd, t.xd, conv, t.wd, &mut ws_bytes),
        }
    });
    if let Some(why) = invalid {
        s.expect_failure("GetWorkSpaceSize", status, why);
    }
    if status != 0 {
        return ("GetWorkSpaceSize", None, 1.0);
    }
    if ws_bytes > MAX_WORKSPACE {
        s.finding(format!("{dir:?}: GetWorkSpaceSize asks for {ws_bytes} bytes"));
        return ("GetWorkSpaceSize", None, 1.0);
    }
    let mut ws = HostBuf::poisoned(ws_bytes.div_ceil(4));
    let ws_ptr = if ws_bytes == 0 { null_mut() } else { ws.ptr() };
    let (px, pw, py) = (x.ptr(), w.ptr(), y.ptr());
    let mut perf = [ConvAlgoPerf::default(); 5];
    let mut returned = 0;
    let name = "Find*Algorithm";
    let status = s.call(name, || unsafe {
        match dir {
            Dir::Forward => miopenFindConvolutionForwardAlgorithm(h, t.xd, px, t.wd, pw, conv, t.yd, py, 5, &mut returned, perf.as_mut_ptr(), ws_ptr, ws_bytes, false),
            Dir::BackwardData => miopenFindConvolutionBackwardDataAlgorithm(h, t.yd, py, t.wd, pw, conv, t.xd, px, 5, &mut returned, perf.as_mut_ptr(), ws_ptr, ws_bytes, false),
            Dir::BackwardWeights => miopenFindConvolutionBackwardWeightsAlgorithm(h, t.yd, py, t.xd, px, conv, t.wd, pw, 5, &mut returned, perf.as_mut_ptr(), ws_ptr, ws_bytes, false),
        }
    });
    if status != 0 {
        return (name, Some(status), 1.0);
    }
    if !(1..=5).contains(&returned) || perf[..returned as usize].windows(2).any(|p| p[0].time > p[1].time) {
        s.finding(format!("{name} returned {returned} results, or unsorted ones"));
        return (name, None, 1.0);
    }
    let algo = perf[r.range(0, returned as i64 - 1) as usize].algo;
    let (alpha, beta) = (r.pick(&[1.0f32, 2.0, 0.5]), r.pick(&[0.0f32, 1.0, -0.5]));
    let (pa, pb) = ((&alpha as *const f32).cast::<c_void>(), (&beta as *const f32).cast::<c_void>());
    let found = match dir {
        Dir::Forward => y.bits(),
        Dir::BackwardData => x.bits(),
        Dir::BackwardWeights => w.bits(),
    };
    let name = match dir {
        Dir::Forward => "miopenConvolutionForward",
        Dir::BackwardData => "miopenConvolutionBackwardData",
        Dir::BackwardWeights => "miopenConvolutionBackwardWeights",
    };
    let status = s.call(name, || unsafe {
        match dir {
            Dir::Forward => miopenConvolutionForward(h, pa, t.xd, px, t.wd, pw, conv, algo, pb, t.yd, py, ws_ptr, ws_bytes),
            Dir::BackwardData => miopenConvolutionBackwardData(h, pa, t.yd, py, t.wd, pw, conv, algo, pb, t.xd, px, ws_ptr, ws_bytes),
            Dir::BackwardWeights => miopenConvolutionBackwardWeights(h, pa, t.yd, py, t.xd, px, conv, algo, pb, t.wd, pw, ws_ptr, ws_bytes),
        }
    });
    if status != 0 {
        // The algorithm Find returned, with the workspace Find used, must run.
        s.finding(format!("{name} refused the algorithm Find returned ({algo}): {}", last_error()));
        let out = match dir {
            Dir::Forward => &*y,
            Dir::BackwardData => &*x,
            Dir::BackwardWeights => &*w,
        };
        s.unchanged(name, out, &found);
        return (name, None, 1.0);
    }
    (name, Some(0), (alpha + beta) as f64)
}

/// Find 2.0: a problem with the three descriptors, its solutions, the fastest run.
pub fn find2(s: &mut Stats, h: MiopenHandle, conv: MiopenConv, t: &Tensors, dir: Dir, (x, w, y): Bufs, invalid: Option<&'static str>) -> (&'static str, Option<i32>, f64) {
    let direction = match dir {
        Dir::Forward => 0,
        Dir::BackwardData => 1,
        Dir::BackwardWeights => 2,
    };
    let mut p = null_mut();
    s.call("miopenCreateConvProblem", || unsafe { miopenCreateConvProblem(&mut p, conv, direction) });
    for (id, d) in [(1, t.xd), (2, t.wd), (3, t.yd)] {
        s.call("miopenSetProblemTensorDescriptor", || unsafe { miopenSetProblemTensorDescriptor(p, id, d) });
    }
    let mut sols = [null_mut(); 4];
    let mut count = 0usize;
    let status = s.call("miopenFindSolutions", || unsafe { miopenFindSolutions(h, p, null_mut(), sols.as_mut_ptr(), &mut count, 4) });
    unsafe { miopenDestroyProblem(p) };
    if let Some(why) = invalid {
        s.expect_failure("miopenFindSolutions", status, why);
    }
    if status != 0 {
        return ("miopenFindSolutions", None, 1.0);
    }
    let mut ws_bytes = 0usize;
    s.call("miopenGetSolutionWorkspaceSize", || unsafe { miopenGetSolutionWorkspaceSize(sols[0], &mut ws_bytes) });
    if ws_bytes > MAX_WORKSPACE {
        s.finding(format!("{dir:?}: a Find 2.0 solution asks for {ws_bytes} bytes"));
        return ("miopenGetSolutionWorkspaceSize", None, 1.0);
    }
    let mut ws = HostBuf::poisoned(ws_bytes.div_ceil(4));
    let ws_ptr = if ws_bytes == 0 { null_mut() } else { ws.ptr() };
    let args = [
        TensorArgument { id: 1, descriptor: std::ptr::null(), buffer: x.ptr() },
        TensorArgument { id: 2, descriptor: std::ptr::null(), buffer: w.ptr() },
        TensorArgument { id: 3, descriptor: std::ptr::null(), buffer: y.ptr() },
    ];
    let status = s.call("miopenRunSolution", || unsafe { miopenRunSolution(h, sols[0], 3, args.as_ptr(), ws_ptr, ws_bytes) });
    for sol in sols.iter().take(count) {
        unsafe { miopenDestroySolution(*sol) };
    }
    ("miopenRunSolution", Some(status), 1.0)
}
