//! `bench`: the problems of a list file (`../shared/bench/cba_resnet.txt` format,
//! C-H-W-K-fy-fx-py-px, stride 1) as one fused conv+bias+activation plan and as three
//! separate calls (convolution, bias, activation), the comparison MIOpen's fusion speedup
//! chart makes. The two paths are timed in alternation (`timing::time_pair`) so a busy
//! machine slows both alike. Prints a table (and `--json`, which adds min times).

use crate::args::{parse_dtype, parse_layout, positive, BenchArgs};
use crate::session::Session;
use crate::timing;
use crate::verify::{self, Style};
use crate::Res;
use conflux::conv::{self, Choice, Workspace};
use conflux::reference::fused::{forward_chain, ChainOp};
use conflux::{ops, ActivationDesc, ActivationMode, ConvMode, ConvProblem, DataType, FusionDirection, FusionPlan, OpArg, OpArgs, TensorDesc};
use serde_json::json;

/// One line of the list file.
#[derive(Clone, Debug)]
pub struct Problem {
    pub text: String,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub k: usize,
    pub fy: usize,
    pub fx: usize,
    pub py: usize,
    pub px: usize,
}

/// Problems of a list file; `#` starts a comment, blank lines are skipped.
pub fn parse_list(text: &str) -> Res<Vec<Problem>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let v: Vec<usize> = line
            .split('-')
            .map(|t| t.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("list line {}: '{line}' is not C-H-W-K-fy-fx-py-px (8 non-negative integers)", i + 1))?;
        if v.len() != 8 || v[..6].contains(&0) {
            return Err(format!("list line {}: '{line}' needs 8 fields C-H-W-K-fy-fx-py-px with positive sizes", i + 1).into());
        }
        out.push(Problem { text: line.to_string(), c: v[0], h: v[1], w: v[2], k: v[3], fy: v[4], fx: v[5], py: v[6], px: v[7] });
    }
    if out.is_empty() {
        return Err("the problem list has no problems".into());
    }
    Ok(out)
}

/// One row of the table.
pub struct Row {
    pub problem: String,
    pub solver: String,
    pub fused_ms: f64,
    pub unfused_ms: f64,
    /// Fastest single iteration of each path: steadier than the average on a shared machine.
    pub fused_min_ms: f64,
    pub unfused_min_ms: f64,
    pub gflops: f64,
}

pub fn run(s: &Session, a: &BenchArgs) -> Res<()> {
    let dt = parse_dtype(&a.dtype)?;
    let layout = parse_layout(&a.layout, 4)?;
    let n = match a.n {
        Some(v) => positive("batchsize", v)?,
        None if s.is_gpu() => 64,
        None => 1,
    };
    let iters = positive("iter", a.iter)?;
    let act_mode = i32::try_from(a.activ_mode).ok().and_then(ActivationMode::from_i32).ok_or_else(|| format!("--activMode {}: not an activation mode (0..9, 100..105)", a.activ_mode))?;
    if let Some(path) = &a.plot {
        crate::plot::check_extension(path)?;
    }
    let text = std::fs::read_to_string(&a.list).map_err(|e| format!("cannot read {}: {e}", a.list.display()))?;
    let problems = parse_list(&text)?;
    s.out.set("bench", json!({ "list": a.list.display().to_string(), "n": n, "dtype": dt.short(), "layout": layout.name(), "activation": format!("{act_mode:?}"), "iters": iters }));
    s.out.line(format!("bench: {} problems, N={n}, {}, {}, conv+bias+{act_mode:?}, {iters} timed iterations, {}", problems.len(), dt.short(), layout.name(), s.handle.device().name()));
    let mut rows = Vec::new();
    for p in &problems {
        let row = one(s, p, n, dt, layout, act_mode, iters, a.verify != 0).map_err(|e| format!("{}: {e}", p.text))?;
        s.out.push(
            "rows",
            json!({ "problem": row.problem, "n": n, "solver": row.solver, "fused_ms": row.fused_ms, "unfused_ms": row.unfused_ms,
                    "speedup": row.unfused_ms / row.fused_ms, "gflops": row.gflops,
                    "fused_min_ms": row.fused_min_ms, "unfused_min_ms": row.unfused_min_ms }),
        );
        rows.push(row);
    }
    print_table(s, &rows);
    if let Some(path) = &a.plot {
        let title = format!("conflux fused conv+bias+{act_mode:?} vs unfused, N={n}, {}, {}", dt.short(), s.handle.device().name());
        crate::plot::speedup_chart(path, &rows, &title)?;
        s.out.line(format!("chart written to {}", path.display()));
        s.out.set("plot", json!(path.display().to_string()));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn one(s: &Session, p: &Problem, n: usize, dt: DataType, layout: conflux::Layout, act_mode: ActivationMode, iters: usize, verify_on: bool) -> Res<Row> {
    let h = &s.handle;
    crate::conv::check_fits(&[p.h, p.w], &[p.py, p.px], &[p.fy, p.fx], &[1, 1])?;
    let x = TensorDesc::with_layout(dt, layout, &[n, p.c, p.h, p.w])?;
    let w = TensorDesc::with_layout(dt, layout, &[p.k, p.c, p.fy, p.fx])?;
    let b = TensorDesc::new(dt, &[1, p.k, 1, 1])?;
    let cd = s.conv_desc(ConvMode::Convolution, &[p.py as i64, p.px as i64], &[1, 1], &[1, 1])?;
    let act = ActivationDesc::new(act_mode, 0.0, 0.0, 0.0);
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
    plan.add_conv_forward(&cd, &w)?;
    plan.add_bias(&b)?;
    plan.add_activation(act_mode)?;
    plan.compile(h)?;
    let y = plan.output_desc().clone();
    let scale = 1.0 / ((p.c * p.fy * p.fx) as f64).sqrt();
    let (xv, wv, bv) = (s.uniform(&x, -1.0, 1.0), s.uniform(&w, -scale, scale), s.uniform(&b, -1.0, 1.0));
    let (xb, wb, bb, yb) = (s.upload(&x, &xv)?, s.upload(&w, &wv)?, s.upload(&b, &bv)?, s.zeros(&y)?);
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: wb.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(1, OpArg::Bias { b: bb.ptr() });
    args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    let fused = || plan.execute(h, &x, xb.ptr(), &y, yb.ptr(), &args);
    fused()?;
    if verify_on {
        let mut chain = [ChainOp::Conv { conv: &cd, w_desc: &w, w: &wv }, ChainOp::Bias { b_desc: &b, b: &bv }, ChainOp::Activation(act)];
        let mut want = vec![0.0; y.element_space()];
        forward_chain(&x, &xv, &mut chain, &y, &mut want)?;
        let mut got = s.download(&yb, dt, want.len())?;
        verify::check(s, &format!("{} fused", p.text), Style::Plain, verify::FWD, &mut got, &want, dt, 1.0);
    }

    // Unfused: what a framework without fusion runs, one call per op.
    let problem = ConvProblem::forward(&cd, &x, &w, &y)?;
    let ws_bytes = conv::workspace_size(h, &problem)?;
    let wsb = h.alloc(ws_bytes.max(1))?;
    let ws = Workspace { ptr: wsb.ptr(), bytes: ws_bytes };
    let (y1, y2) = (s.zeros(&y)?, s.zeros(&y)?);
    let unfused = || -> conflux::Result<()> {
        conv::forward(h, &cd, &x, xb.ptr(), &w, wb.ptr(), &y, y1.ptr(), 1.0, 0.0, Choice::Auto, ws)?;
        conv::bias::forward_bias(h, 1.0, &b, bb.ptr(), 0.0, &y, y1.ptr())?;
        ops::activation_forward(h, &act, &y, y1.ptr(), &y, y2.ptr())
    };
    unfused()?;
    let (tf, tu) = timing::time_pair(s, iters, || fused().map_err(Into::into), || unfused().map_err(Into::into))?;
    let (gflops, _) = timing::rates(2.0 * problem.macs(), 0.0, &tf);
    Ok(Row { problem: p.text.clone(), solver: plan.solver_name().unwrap_or("?").to_string(), fused_ms: tf.avg_ms, unfused_ms: tu.avg_ms, fused_min_ms: tf.min_ms, unfused_min_ms: tu.min_ms, gflops })
}

fn print_table(s: &Session, rows: &[Row]) {
    s.out.line(format!("{:<26} {:<22} {:>12} {:>12} {:>8} {:>10}", "problem", "solver", "fused ms", "unfused ms", "speedup", "GFLOP/s"));
    for r in rows {
        s.out.line(format!(
            "{:<26} {:<22} {:>12.4} {:>12.4} {:>7.2}x {:>10.2}",
            r.problem,
            r.solver,
            r.fused_ms,
            r.unfused_ms,
            r.unfused_ms / r.fused_ms,
            r.gflops
        ));
    }
    let geo = (rows.iter().map(|r| (r.unfused_ms / r.fused_ms).ln()).sum::<f64>() / rows.len() as f64).exp();
    s.out.line(format!("geomean speedup (unfused / fused): {geo:.2}x"));
    s.out.set("geomean_speedup", json!(geo));
}
