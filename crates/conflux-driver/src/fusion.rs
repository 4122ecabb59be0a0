//! `CBAInfer` / `CBAInferfp16`: a vertical fusion plan of conv, bias, batch-norm inference
//! and activation in MIOpen's seven modes (`-F 0..6`), compiled once, executed, verified
//! against the f64 reference chain and timed. conflux extras: any activation, NHWC, 3-D.

use crate::args::{non_negative, parse_layout, positive, CbaArgs};
use crate::conv::{check_fits, pad_for_mode};
use crate::session::Session;
use crate::solvers::list_solvers;
use crate::timing::{self, rates};
use crate::verify::{self, Style};
use crate::Res;
use conflux::batchnorm::derive_bn_desc;
use conflux::reference::fused::{forward_chain, ChainOp};
use conflux::{ActivationDesc, ActivationMode, BnMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, OpArg, OpArgs, TensorDesc};
use serde_json::json;

/// MIOpen's fusion modes: name and which ops the plan has (conv, bias, BN, activation).
pub const MODES: [(&str, [bool; 4]); 7] = [
    ("Convolution+Bias+BatchNorm+Activation", [true, true, true, true]),
    ("Convolution+BatchNorm+Activation", [true, false, true, true]),
    ("BatchNorm+Activation", [false, false, true, true]),
    ("Convolution+BatchNorm", [true, false, true, false]),
    ("Convolution+Bias+Activation", [true, true, false, true]),
    ("Convolution+Activation", [true, false, false, true]),
    ("Convolution+Bias", [true, true, false, false]),
];

/// MIOpen's CBAInfer batch-norm epsilon.
const BN_EPS: f64 = 1e-6;

/// Plan input descriptor and convolution (when the mode has one) from the flags.
/// The plan's convolution and filter, when the mode has one.
type ConvPart = Option<(ConvDesc, TensorDesc)>;

fn geometry(s: &Session, a: &CbaArgs, dt: DataType) -> Res<(TensorDesc, ConvPart)> {
    let nd = match a.spatial_dim {
        2 => 2,
        3 => 3,
        v => return Err(format!("--spatial_dim must be 2 or 3, got {v}").into()),
    };
    let pick = |d: i64, h: i64, w: i64| if nd == 3 { vec![d, h, w] } else { vec![h, w] };
    let pos = |name: &str, v: Vec<i64>| -> Res<Vec<usize>> { v.into_iter().map(|v| positive(name, v).map_err(Into::into)).collect() };
    let (n, c, k, g) = (positive("batchsize", a.n)?, positive("in_channels", a.c)?, positive("out_channels", a.k)?, positive("group_count", a.groups)?);
    let input = pos("input size", pick(a.in_d, a.h, a.w))?;
    let layout = parse_layout(a.layout.as_deref().unwrap_or(""), nd + 2)?;
    let mut xl = vec![n, c];
    xl.extend(&input);
    let x = TensorDesc::with_layout(dt, layout, &xl)?;
    let has_conv = MODES[a.fusion_mode as usize].1[0];
    if !has_conv {
        return Ok((x, None));
    }
    let fil = pos("filter size", pick(a.fil_d, a.fil_h, a.fil_w))?;
    let strides = pos("conv stride", pick(a.stride_d, a.stride_h, a.stride_w))?;
    let dils = pos("dilation", pick(a.dil_d, a.dil_h, a.dil_w))?;
    let pads: Vec<usize> = pick(a.pad_d, a.pad_h, a.pad_w).into_iter().map(|v| non_negative("pad", v)).collect::<Result<_, _>>()?;
    let extents: Vec<usize> = (0..nd).map(|i| dils[i] * (fil[i] - 1) + 1).collect();
    let pm = a.pad_mode.to_ascii_lowercase();
    let pads: Vec<usize> = (0..nd).map(|i| pad_for_mode(&pm, input[i], extents[i], strides[i], pads[i])).collect();
    if c % g != 0 || k % g != 0 {
        return Err(format!("Invalid group number: in_channels {c} and out_channels {k} must be divisible by group_count {g}").into());
    }
    check_fits(&input, &pads, &fil, &dils)?;
    let mut wl = vec![k, c / g];
    wl.extend(&fil);
    let w = TensorDesc::with_layout(dt, layout, &wl)?;
    let to_i = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let mut conv = s.conv_desc(ConvMode::Convolution, &to_i(&pads), &to_i(&strides), &to_i(&dils))?;
    conv.set_groups(g as i64)?;
    Ok((x, Some((conv, w))))
}

pub fn run(s: &Session, a: &CbaArgs, dt: DataType) -> Res<()> {
    if !(0..=6).contains(&a.fusion_mode) {
        return Err("Fusion mode out of range.".into());
    }
    if a.iter < 1 {
        return Err("Fatal: Number of iterations must be > 0".into());
    }
    let (name, [_, has_bias, has_bn, has_act]) = MODES[a.fusion_mode as usize];
    let bn_mode = match a.bn_mode {
        0 => BnMode::PerActivation,
        1 => BnMode::Spatial,
        _ => return Err("Incorrect Batch Normalization Mode".into()),
    };
    let act_mode = i32::try_from(a.activ_mode).ok().and_then(ActivationMode::from_i32).ok_or_else(|| format!("--activMode {}: not an activation mode (0..9, 100..105)", a.activ_mode))?;
    let act = ActivationDesc::new(act_mode, a.alpha, a.beta, a.gamma);
    let (x, conv) = geometry(s, a, dt)?;

    // Ops in MIOpen's order C, [B], [N], [A].
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
    if let Some((cd, w)) = &conv {
        plan.add_conv_forward(cd, w)?;
    }
    let out = plan.output_desc().clone();
    let mut bl = vec![1; out.rank()];
    bl[1] = out.c();
    let b_desc = TensorDesc::new(dt, &bl)?;
    let bn_desc = derive_bn_desc(&out, bn_mode)?;
    if has_bias {
        plan.add_bias(&b_desc)?;
    }
    if has_bn {
        plan.add_bn_inference(bn_mode, &bn_desc)?;
    }
    if has_act {
        plan.add_activation(act_mode)?;
    }
    s.out.line(format!("Running fusion: {name}"));
    s.out.set(
        "problem",
        json!({ "op": "CBAInfer", "fusion_mode": a.fusion_mode, "name": name, "dtype": dt.short(), "x": x.lens(), "y": out.lens(),
                "w": conv.as_ref().map(|(_, w)| w.lens().to_vec()), "layout": x.packed_layout().map(|l| l.name()),
                "conv": conv.as_ref().map(|(c, _)| c.key()), "activation": format!("{act_mode:?}"), "bn_mode": format!("{bn_mode:?}") }),
    );
    if s.list_solvers {
        match plan.problem() {
            Ok(fp) => list_solvers(s, name, &fp),
            Err(e) => s.out.line(format!("{name}: the plan does not lower to a fused problem: {e}")),
        }
        return Ok(());
    }
    if let Err(e) = plan.compile(&s.handle) {
        eprintln!("{name} plan not supported.");
        return Err(format!("{name}: {e}").into());
    }
    let solver = plan.solver_name().unwrap_or("?");
    s.out.line(format!("Fusion plan solver: {solver}"));

    // Data: weights scaled by 1/√fan-in keep the chain's values O(1); variances positive.
    let xv = s.uniform(&x, -1.0, 1.0);
    let xb = s.upload(&x, &xv)?;
    let yb = s.zeros(&out)?;
    let mut args = OpArgs::new();
    let mut idx = 0;
    let mut keep = Vec::new();
    let wv = match &conv {
        Some((_, w)) => {
            let fan_in = (w.element_count() / w.n()) as f64;
            let v = s.uniform(w, -1.0 / fan_in.sqrt(), 1.0 / fan_in.sqrt());
            let b = s.upload(w, &v)?;
            args.set(idx, OpArg::Conv { w: b.ptr(), alpha: 1.0, beta: 0.0 });
            idx += 1;
            keep.push(b);
            v
        }
        None => Vec::new(),
    };
    let bv = s.uniform(&b_desc, -1.0, 1.0);
    if has_bias {
        let b = s.upload(&b_desc, &bv)?;
        args.set(idx, OpArg::Bias { b: b.ptr() });
        idx += 1;
        keep.push(b);
    }
    let (scale, shift, mean, var) = (s.uniform(&bn_desc, 0.5, 1.5), s.uniform(&bn_desc, -0.5, 0.5), s.uniform(&bn_desc, -0.5, 0.5), s.uniform(&bn_desc, 0.5, 1.5));
    if has_bn {
        let bufs = [&scale, &shift, &mean, &var].map(|v| s.upload(&bn_desc, v));
        let [sb, hb, mb, vb] = bufs;
        let (sb, hb, mb, vb) = (sb?, hb?, mb?, vb?);
        args.set(idx, OpArg::BnInference { scale: sb.ptr(), bias: hb.ptr(), mean: mb.ptr(), var: vb.ptr(), eps: BN_EPS });
        idx += 1;
        keep.extend([sb, hb, mb, vb]);
    }
    if has_act {
        args.set(idx, OpArg::Activation { alpha: a.alpha, beta: a.beta, gamma: a.gamma });
    }
    let exec = || plan.execute(&s.handle, &x, xb.ptr(), &out, yb.ptr(), &args);
    exec()?;
    s.out.push("runs", json!({ "op": "CBAInfer", "solver": solver }));

    if a.verify != 0 {
        let mut chain = Vec::new();
        if let Some((cd, w)) = &conv {
            s.out.line("Running CPU fwd convolution.");
            chain.push(ChainOp::Conv { conv: cd, w_desc: w, w: &wv });
        }
        if has_bias {
            chain.push(ChainOp::Bias { b_desc: &b_desc, b: &bv });
        }
        if has_bn {
            s.out.line(if bn_mode == BnMode::Spatial { "Running CPU spatial BN." } else { "Running CPU per activation BN." });
            chain.push(ChainOp::BnInference { mode: bn_mode, scale: &scale, bias: &shift, mean: &mean, var: &var, eps: BN_EPS });
        }
        if has_act {
            s.out.line("Running CPU fwd activation.");
            chain.push(ChainOp::Activation(act));
        }
        let mut want = vec![0.0; out.element_space()];
        forward_chain(&x, &xv, &mut chain, &out, &mut want)?;
        let mut got = s.download(&yb, dt, want.len())?;
        verify::check(s, "Forward Activation", Style::Plain, verify::FWD, &mut got, &want, dt, 1.0);
    }

    if a.time != 0 {
        let t = timing::time(s, a.iter as usize, || exec().map_err(Into::into))?;
        let flops = plan.problem().ok().and_then(|p| p.conv_problem().map(|c| 2.0 * c.macs())).unwrap_or(0.0);
        let params = keep.iter().map(|b| b.len()).sum::<usize>();
        let bytes = (x.num_bytes() + out.num_bytes() + params) as f64;
        let (gf, gb) = rates(flops, bytes, &t);
        let dev = s.dev_label();
        s.out.line(format!("{dev} Fused Kernel Min Time Elapsed: {:.6} ms", t.min_ms));
        s.out.line(format!("{dev} Fused Kernel Avg Time Elapsed: {:.6} ms, for {} iterations.", t.avg_ms, t.iters));
        if a.wall != 0 {
            s.out.line(format!("Wall-clock Time Elapsed: {:.6} ms, for {} iterations.", t.wall_ms, t.iters));
        }
        s.out.line("stats: name, flopCnt, bytes, GFLOPs, GB/s, timeMs");
        s.out.line(format!("stats: cba-F{}, {flops:.0}, {bytes:.0}, {gf:.2}, {gb:.2}, {:.6}", a.fusion_mode, t.avg_ms));
        let roof = timing::roofline(s, dt, flops, bytes, &t);
        if let Some(f) = roof {
            s.out.line(format!("roofline: {:.1}% of the device's peak", f * 100.0));
        }
        s.out.push("timing", timing::to_json(&format!("cba-F{}", a.fusion_mode), flops, bytes, &t, roof));
    }
    Ok(())
}
