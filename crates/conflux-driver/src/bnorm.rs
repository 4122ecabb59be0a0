//! `bnorm` / `bnormfp16`: batch-norm forward training (`-F 1`), inference (`-F 2`) or
//! backward (`-b 1`) through `conflux::ops`, verified against the f64 reference (output and
//! every statistic written) and timed. Parameters and statistics are Float (MIOpen's derived
//! descriptor type), so `bnormfp16` is MIOpen's `bnormfp16fp32`.

use crate::args::{parse_layout, positive, BnormArgs};
use crate::session::Session;
use crate::solvers::list_solvers;
use crate::timing::{self, rates};
use crate::verify;
use crate::Res;
use conflux::batchnorm::derive_bn_desc;
use conflux::ops::{self, BnBackwardArgs, BnInferenceArgs, BnTrainingArgs};
use conflux::reference as r;
use conflux::{BnMode, Buffer, DataType, DevPtr, FusionDirection, FusionPlan, TensorDesc};
use serde_json::json;

/// MIOpenDriver's batch-norm epsilon.
const EPS: f64 = 1e-3;
/// Running-average factor of the verified training run: 0.5 rather than MIOpen's first-iteration
/// 1/(1+0) = 1, so the old running values count and a blending bug shows.
const EXP_AVG: f64 = 0.5;
/// Statistics and parameter gradients are Float sums over N·H·W terms; MIOpen's RMS tolerance
/// for them is 1e-4 (conflux's relative-L2 Float tolerance is 1e-5).
const STATS_TOL_SCALE: f64 = 10.0;

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Train,
    Infer,
    Back,
}

pub fn run(s: &Session, a: &BnormArgs, dt: DataType) -> Res<()> {
    if a.iter < 1 {
        return Err("Fatal: Number of iterations must be > 0".into());
    }
    let mut forw = a.forw;
    if forw == 0 && a.back == 0 {
        forw = 1;
    }
    if forw != 0 && a.back == 1 {
        s.out.line("Warning: Deactivate forward to run backward on Batch Norm. Running forward only.");
    }
    let which = match forw {
        1 => Which::Train,
        2 => Which::Infer,
        0 => Which::Back,
        v => return Err(format!("--forw must be 0, 1 or 2, got {v}").into()),
    };
    let mode = match a.mode {
        0 => BnMode::PerActivation,
        1 => BnMode::Spatial,
        _ => return Err("Incorrect Batch Normalization Mode".into()),
    };
    let mut lens = vec![positive("batchsize", a.n)?, positive("in_channels", a.c)?];
    if a.d > 0 {
        lens.push(a.d as usize);
    }
    lens.extend([positive("in_h", a.h)?, positive("in_w", a.w)?]);
    let x = TensorDesc::with_layout(dt, parse_layout(&a.layout, lens.len())?, &lens)?;
    let p = derive_bn_desc(&x, mode)?;
    s.out.set("problem", json!({ "op": "bnorm", "dtype": dt.short(), "x": x.lens(), "mode": format!("{mode:?}"),
        "which": match which { Which::Train => "forward training", Which::Infer => "forward inference", Which::Back => "backward" } }));
    if s.list_solvers {
        let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
        let title = match which {
            Which::Train => { plan.add_bn_forward(mode, a.run != 0)?; "Forward Batch Normalization (training)" }
            Which::Infer => { plan.add_bn_inference(mode, &p)?; "Forward Batch Normalization (inference)" }
            Which::Back => { plan.add_bn_backward(mode)?; "Backwards Batch Normalization" }
        };
        list_solvers(s, title, &plan.problem()?);
        return Ok(());
    }
    match which {
        Which::Train | Which::Infer => forward(s, a, &x, &p, mode, which),
        Which::Back => backward(s, a, &x, &p, mode),
    }
}

/// A parameter-shaped buffer with its host values.
fn param(s: &Session, p: &TensorDesc, lo: f64, hi: f64) -> Res<(Vec<f64>, Buffer)> {
    let v = s.uniform(p, lo, hi);
    let b = s.upload(p, &v)?;
    Ok((v, b))
}

fn forward(s: &Session, a: &BnormArgs, x: &TensorDesc, p: &TensorDesc, mode: BnMode, which: Which) -> Res<()> {
    let h = &s.handle;
    let dt = x.dtype();
    let xv = s.uniform(x, -1.0, 1.0);
    let (xb, yb) = (s.upload(x, &xv)?, s.zeros(x)?);
    let (scale, sb) = param(s, p, 0.5, 1.5)?;
    let (bias, bb) = param(s, p, -0.5, 0.5)?;
    let (rmean, rmb) = param(s, p, -0.5, 0.5)?;
    let (rvar, rvb) = param(s, p, 0.5, 1.5)?;
    let (smb, svb) = (s.zeros(p)?, s.zeros(p)?);
    let (run, save) = (a.run != 0, a.save != 0);
    let opt = |on: bool, b: &Buffer| if on { b.ptr() } else { DevPtr::NULL };
    let once = || -> conflux::Result<()> {
        match which {
            Which::Train => {
                let args = BnTrainingArgs {
                    scale: sb.ptr(),
                    bias: bb.ptr(),
                    running_mean: opt(run, &rmb),
                    running_var: opt(run, &rvb),
                    saved_mean: opt(save, &smb),
                    saved_inv_var: opt(save, &svb),
                    exp_avg_factor: EXP_AVG,
                    eps: EPS,
                };
                ops::bn_forward_training(h, mode, x, xb.ptr(), x, yb.ptr(), &[p, p], &args)
            }
            _ => {
                // Without -r the estimates are NULL and MIOpen's rule uses batch statistics.
                let args = BnInferenceArgs { scale: sb.ptr(), bias: bb.ptr(), mean: opt(run, &rmb), var: opt(run, &rvb), eps: EPS };
                ops::bn_forward_inference(h, mode, x, xb.ptr(), x, yb.ptr(), &[p, p, p, p], &args)
            }
        }
    };
    once()?;
    if a.verify != 0 {
        let mut want = vec![0.0; x.element_space()];
        let np = p.element_count();
        let (mut wrm, mut wrv, mut wsm, mut wsv) = (rmean.clone(), rvar.clone(), vec![0.0; np], vec![0.0; np]);
        if which == Which::Infer && run {
            r::bn_inference(mode, x, &xv, x, &mut want, &scale, &bias, &rmean, &rvar, EPS)?;
        } else {
            let train = which == Which::Train;
            r::bn_forward_training(
                mode, x, &xv, x, &mut want, &scale, &bias, EXP_AVG, EPS,
                (train && run).then_some(&mut wrm[..]), (train && run).then_some(&mut wrv[..]),
                (train && save).then_some(&mut wsm[..]), (train && save).then_some(&mut wsv[..]),
            )?;
        }
        let stol = verify::tolerance(s, DataType::Float, STATS_TOL_SCALE);
        let mut ok = true;
        if which == Which::Train {
            let stats = [("running mean", run, &rmb, &wrm), ("running variance", run, &rvb, &wrv), ("saved mean", save, &smb, &wsm), ("saved inverse variance", save, &svb, &wsv)];
            for (what, on, buf, want) in stats {
                if on {
                    let mut got = s.download(buf, DataType::Float, np)?;
                    ok &= line(s, "Forward train batch norm", what, verify::compare(s, what, verify::FWD, &mut got, want, stol));
                }
            }
        }
        let mut got = s.download(&yb, dt, want.len())?;
        let o = verify::compare(s, "output", verify::FWD, &mut got, &want, verify::tolerance(s, dt, 1.0));
        ok &= line(s, "Forward batch norm", "output", o);
        if ok {
            s.out.line(format!("Forward Batch Norm Verifies on {}.", s.verified_on()));
        }
    }
    if a.time != 0 {
        let t = timing::time(s, a.iter as usize, || once().map_err(Into::into))?;
        let (read, written) = (x.num_bytes() + 2 * p.num_bytes(), x.num_bytes());
        print_time(s, "Forward", "bnormf", read, written, &t);
        let bytes = (read + written) as f64;
        s.out.push("timing", timing::to_json("bnormf", 0.0, bytes, &t, timing::roofline(s, dt, 0.0, bytes, &t)));
    }
    Ok(())
}

fn backward(s: &Session, a: &BnormArgs, x: &TensorDesc, p: &TensorDesc, mode: BnMode) -> Res<()> {
    let h = &s.handle;
    let dt = x.dtype();
    let np = p.element_count();
    let xv = s.uniform(x, -1.0, 1.0);
    let dyv = s.uniform(x, -1.0, 1.0);
    let (xb, dyb, dxb) = (s.upload(x, &xv)?, s.upload(x, &dyv)?, s.zeros(x)?);
    let (scale, sb) = param(s, p, 0.5, 1.5)?;
    let (dsb, dbb) = (s.zeros(p)?, s.zeros(p)?);
    // With -s 1 the saved statistics are the forward pass's (computed here, rounded to Float).
    let save = a.save != 0;
    let (mean, var) = r::bn_batch_stats(mode, x, &xv)?;
    let f32r = |v: f64| v as f32 as f64;
    let sm: Vec<f64> = mean.iter().map(|&m| f32r(m)).collect();
    let si: Vec<f64> = var.iter().map(|&v| f32r(1.0 / (v + EPS).sqrt())).collect();
    let (smb, sib) = (s.upload(p, &sm)?, s.upload(p, &si)?);
    let args = BnBackwardArgs {
        scale: sb.ptr(),
        dscale: dsb.ptr(),
        dbias: dbb.ptr(),
        saved_mean: if save { smb.ptr() } else { DevPtr::NULL },
        saved_inv_var: if save { sib.ptr() } else { DevPtr::NULL },
        eps: EPS,
    };
    let once = || ops::bn_backward(h, mode, x, xb.ptr(), x, dyb.ptr(), x, dxb.ptr(), &[p, p, p], &args);
    once()?;
    if a.verify != 0 {
        let (mut wdx, mut wds, mut wdb) = (vec![0.0; x.element_space()], vec![0.0; np], vec![0.0; np]);
        r::bn_backward(mode, x, &xv, x, &dyv, x, &mut wdx, &scale, &mut wds, &mut wdb, EPS, save.then_some((&sm[..], &si[..])))?;
        let stol = verify::tolerance(s, DataType::Float, STATS_TOL_SCALE);
        let mut ok = true;
        let mut got = s.download(&dxb, dt, wdx.len())?;
        ok &= line(s, "Backwards prop batch norm", "dx", verify::compare(s, "dx", verify::BWD, &mut got, &wdx, verify::tolerance(s, dt, 1.0)));
        for (what, buf, want) in [("dscale", &dsb, &wds), ("dbias", &dbb, &wdb)] {
            let mut got = s.download(buf, DataType::Float, np)?;
            ok &= line(s, "Backwards prop batch norm", what, verify::compare(s, what, verify::BWD, &mut got, want, stol));
        }
        if ok {
            s.out.line(format!("Backwards Prop Batch Norm Verifies on {}.", s.verified_on()));
        }
    }
    if a.time != 0 {
        let t = timing::time(s, a.iter as usize, || once().map_err(Into::into))?;
        let (read, written) = (2 * x.num_bytes() + p.num_bytes(), x.num_bytes() + 2 * p.num_bytes());
        print_time(s, "Backwards", "bnormb", read, written, &t);
        let bytes = (read + written) as f64;
        s.out.push("timing", timing::to_json("bnormb", 0.0, bytes, &t, timing::roofline(s, dt, 0.0, bytes, &t)));
    }
    Ok(())
}

/// MIOpen's per-quantity verification line.
fn line(s: &Session, prefix: &str, what: &str, o: verify::Outcome) -> bool {
    if o.ok {
        s.out.line(format!("{prefix} verification passed on {what} ({:.6e} < {:.1e})", o.err, o.tol));
    } else {
        s.out.line(format!("{prefix} verification FAILED on {what}: {:.6e} > {:.1e}", o.err, o.tol));
        if let Some(why) = o.why {
            s.out.line(format!("  {why}"));
        }
    }
    o.ok
}

fn print_time(s: &Session, dir: &str, name: &str, read: usize, written: usize, t: &timing::Timing) {
    let dev = s.dev_label();
    let (_, gb) = rates(0.0, (read + written) as f64, t);
    s.out.line(format!("{dev} Kernel Min Time {dir} Batch Normalization Elapsed: {:.6} ms", t.min_ms));
    s.out.line(format!("{dev} Kernel Avg Time {dir} Batch Normalization Elapsed: {:.6} ms, for {} iterations.", t.avg_ms, t.iters));
    s.out.line(format!("stats: {name}, 0, {read}, {written}, 0, {gb:.2}, {:.6}", t.avg_ms));
}
