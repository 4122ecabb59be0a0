//! `activ` / `activfp16`: activation forward and backward (`-F 0` both, 1 forward, 2
//! backward) through `conflux::ops`, verified against the f64 reference and timed.

use crate::args::{parse_layout, positive, ActivArgs};
use crate::session::Session;
use crate::solvers::list_solvers;
use crate::timing::{self, rates};
use crate::verify::{self, Style};
use crate::Res;
use conflux::reference as r;
use conflux::{ops, ActivationDesc, ActivationMode, DataType, FusionDirection, FusionPlan, TensorDesc};
use serde_json::json;

pub fn run(s: &Session, a: &ActivArgs, dt: DataType) -> Res<()> {
    if !(0..=2).contains(&a.forw) {
        return Err(format!("--forw must be 0, 1 or 2, got {}", a.forw).into());
    }
    if a.iter < 1 {
        return Err("Fatal: Number of iterations must be > 0".into());
    }
    let mode = i32::try_from(a.mode).ok().and_then(ActivationMode::from_i32).ok_or_else(|| format!("--mode {}: not an activation mode (0..9, 100..105)", a.mode))?;
    let act = ActivationDesc::new(mode, a.alpha, a.beta, a.gamma);
    let lens = [positive("batchsize", a.n)?, positive("in_channels", a.c)?, positive("in_h", a.h)?, positive("in_w", a.w)?];
    let x = TensorDesc::with_layout(dt, parse_layout(a.layout.as_deref().unwrap_or(""), 4)?, &lens)?;
    let (fwd, bwd) = (a.forw != 2, a.forw != 1);
    s.out.set("problem", json!({ "op": "activ", "dtype": dt.short(), "x": x.lens(), "mode": format!("{mode:?}"), "alpha": a.alpha, "beta": a.beta, "gamma": a.gamma }));
    if s.list_solvers {
        for (on, title, back) in [(fwd, "Forward Activation", false), (bwd, "Backward Activation", true)] {
            if on {
                let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
                if back { plan.add_activation_backward(mode)? } else { plan.add_activation(mode)? };
                list_solvers(s, title, &plan.problem()?);
            }
        }
        return Ok(());
    }
    let h = &s.handle;
    let xv = s.uniform(&x, -2.0, 2.0);
    let (xb, yb) = (s.upload(&x, &xv)?, s.zeros(&x)?);
    let bytes = (2 * x.num_bytes()) as f64;
    // The forward result is also backward's y, so it always runs once.
    let fwd_once = || ops::activation_forward(h, &act, &x, xb.ptr(), &x, yb.ptr());
    fwd_once()?;
    if fwd {
        if a.verify != 0 {
            let mut want = vec![0.0; x.element_space()];
            r::activation_forward(&act, &x, &xv, &x, &mut want)?;
            let mut got = s.download(&yb, dt, want.len())?;
            verify::check(s, "Forward Activation", Style::Plain, verify::FWD, &mut got, &want, dt, 1.0);
        }
        if a.time != 0 {
            let t = timing::time(s, a.iter as usize, || fwd_once().map_err(Into::into))?;
            print_time(s, a, "Forward", "fwd-activ", x.num_bytes(), x.num_bytes(), &t);
            s.out.push("timing", timing::to_json("fwd-activ", 0.0, bytes, &t, timing::roofline(s, dt, 0.0, bytes, &t)));
        }
    }
    if bwd {
        let y = s.download(&yb, dt, x.element_space())?;
        let dyv = s.uniform(&x, -1.0, 1.0);
        let (dyb, dxb) = (s.upload(&x, &dyv)?, s.zeros(&x)?);
        let bwd_once = || ops::activation_backward(h, &act, &x, yb.ptr(), &x, dyb.ptr(), &x, xb.ptr(), &x, dxb.ptr());
        bwd_once()?;
        if a.verify != 0 {
            let mut want = vec![0.0; x.element_space()];
            r::activation_backward(&act, &x, &y, &x, &dyv, &x, &xv, &x, &mut want)?;
            let mut got = s.download(&dxb, dt, want.len())?;
            verify::check(s, "Backward Activation", Style::Plain, verify::BWD, &mut got, &want, dt, 1.0);
        }
        if a.time != 0 {
            let t = timing::time(s, a.iter as usize, || bwd_once().map_err(Into::into))?;
            let bytes = (4 * x.num_bytes()) as f64;
            print_time(s, a, "Backward", "bwd-activ", 3 * x.num_bytes(), x.num_bytes(), &t);
            s.out.push("timing", timing::to_json("bwd-activ", 0.0, bytes, &t, timing::roofline(s, dt, 0.0, bytes, &t)));
        }
    }
    Ok(())
}

fn print_time(s: &Session, a: &ActivArgs, dir: &str, name: &str, read: usize, written: usize, t: &timing::Timing) {
    let dev = s.dev_label();
    let (_, gb) = rates(0.0, (read + written) as f64, t);
    s.out.line(format!("{dev} Kernel Min Time {dir} Activation Elapsed: {:.6} ms", t.min_ms));
    s.out.line(format!("{dev} Kernel Avg Time {dir} Activation Elapsed: {:.6} ms, for {} iterations.", t.avg_ms, t.iters));
    s.out.line("stats: name, bytesRead, bytesWritten, GB/s, timeMs");
    s.out.line(format!("stats: {name}, {read}, {written}, {gb:.2}, {:.6}", t.avg_ms));
    if a.wall != 0 {
        s.out.line(format!("Wall-clock Time {dir} {dev} Activation Elapsed: {:.6} ms, for {} iterations.", t.wall_ms, t.iters));
    }
}
