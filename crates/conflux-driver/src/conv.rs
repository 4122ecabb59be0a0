//! `conv` / `convfp16` / `convbfp16` / `convint8`: forward, backward-data and backward-weights
//! (and bias) as MIOpenDriver runs them: build descriptors, choose a solver (Find, immediate mode
//! or a given solution), run, verify against the f64 reference, time. `convint8` is forward
//! only, with int8 x and w and the f32 y that MIOpen's output descriptor gives int8 inputs.

use crate::args::{non_negative, parse_layout, positive, ConvArgs};
use crate::session::Session;
use crate::solvers::list_solvers;
use crate::timing::{self, rates};
use crate::verify::{self, Style};
use crate::Res;
use conflux::conv::{self, Choice, Workspace};
use conflux::fusion::FusedProblem;
use conflux::reference as r;
use conflux::solver::{find_by_id, find_by_name};
use conflux::{Buffer, ConvDesc, ConvMode, ConvProblem, DataType, TensorDesc};
use serde_json::json;

/// The problem as the user states it (transpose included).
pub struct Geometry {
    pub x: TensorDesc,
    pub w: TensorDesc,
    pub y: TensorDesc,
    pub conv: ConvDesc,
}

#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Fwd,
    Bwd,
    Wrw,
}

impl Dir {
    /// (verification name, timing name, stats prefix, exit bit)
    fn names(self) -> (&'static str, &'static str, &'static str, u32) {
        match self {
            Dir::Fwd => ("Forward Convolution", "Forward Conv.", "fwd", verify::FWD),
            Dir::Bwd => ("Backward Convolution Data", "Backward Data Conv.", "bwdd", verify::BWD),
            Dir::Wrw => ("Backward Convolution Weights", "Backward Weights Conv.", "bwdw", verify::WRW),
        }
    }
}

/// Pads for MIOpen's pad modes: `same` keeps ceil(in/stride) outputs, `valid` uses none.
pub fn pad_for_mode(mode: &str, input: usize, extent: usize, stride: usize, pad: usize) -> usize {
    match mode {
        "same" => {
            let out = input.div_ceil(stride);
            ((out - 1) * stride + extent).saturating_sub(input) / 2
        }
        "valid" => 0,
        _ => pad,
    }
}

/// Descriptors from the flags, with the checks MIOpen's descriptors do not make (a filter
/// larger than the padded input would silently give a clamped 1-wide output).
pub fn geometry(s: &Session, a: &ConvArgs, dt: DataType) -> Res<Geometry> {
    let nd = match a.spatial_dim {
        2 => 2,
        3 => 3,
        v => return Err(format!("--spatial_dim must be 2 or 3, got {v}").into()),
    };
    let pick = |d: i64, h: i64, w: i64| if nd == 3 { vec![d, h, w] } else { vec![h, w] };
    let names = |base: &str| if nd == 3 { vec![format!("{base}_d"), format!("{base}_h"), format!("{base}_w")] } else { vec![format!("{base}_h"), format!("{base}_w")] };
    let conv_pos = |base: &str, v: Vec<i64>| -> Res<Vec<usize>> { names(base).iter().zip(v).map(|(n, v)| positive(n, v).map_err(Into::into)).collect() };
    let (n, c, k, g) = (positive("batchsize", a.n)?, positive("in_channels", a.c)?, positive("out_channels", a.k)?, positive("group_count", a.groups)?);
    let input = conv_pos("in", pick(a.in_d, a.h, a.w))?;
    let fil = conv_pos("fil", pick(a.fil_d, a.fil_h, a.fil_w))?;
    let strides = conv_pos("conv_stride", pick(a.stride_d, a.stride_h, a.stride_w))?;
    let dils = conv_pos("dilation", pick(a.dil_d, a.dil_h, a.dil_w))?;
    let pads: Vec<usize> = names("pad").iter().zip(pick(a.pad_d, a.pad_h, a.pad_w)).map(|(n, v)| non_negative(n, v)).collect::<Result<_, _>>()?;
    let out_pads: Vec<usize> =
        names("trans_output_pad").iter().zip(pick(a.out_pad_d, a.out_pad_h, a.out_pad_w)).map(|(n, v)| non_negative(n, v)).collect::<Result<_, _>>()?;
    let mode = match a.mode.as_str() {
        "conv" => ConvMode::Convolution,
        "trans" => ConvMode::Transpose,
        m => return Err(format!("--mode must be conv or trans, got '{m}'").into()),
    };
    let pad_mode = a.pad_mode.to_ascii_lowercase();
    if !matches!(pad_mode.as_str(), "same" | "valid" | "default") {
        return Err(format!("--pad_mode must be same, valid or default, got '{}'", a.pad_mode).into());
    }
    let extents: Vec<usize> = (0..nd).map(|i| dils[i] * (fil[i] - 1) + 1).collect();
    let pads: Vec<usize> = (0..nd).map(|i| pad_for_mode(&pad_mode, input[i], extents[i], strides[i], pads[i])).collect();
    if c % g != 0 || k % g != 0 {
        return Err(format!("Invalid group number: in_channels {c} and out_channels {k} must be divisible by group_count {g}").into());
    }
    if mode == ConvMode::Convolution {
        check_fits(&input, &pads, &fil, &dils)?;
    }
    let rank = nd + 2;
    let (li, lo, lf) = match &a.layout {
        Some(l) => (l.as_str(), l.as_str(), l.as_str()),
        None => (a.in_layout.as_str(), a.out_layout.as_str(), a.fil_layout.as_str()),
    };
    let (li, lo, lf) = (parse_layout(li, rank)?, parse_layout(lo, rank)?, parse_layout(lf, rank)?);
    let mut xl = vec![n, c];
    xl.extend(&input);
    // Filter: K × C/G normally; C × K/G for transpose (its input channels are the filter's K).
    let mut wl = if mode == ConvMode::Transpose { vec![c, k / g] } else { vec![k, c / g] };
    wl.extend(&fil);
    let x = TensorDesc::with_layout(dt, li, &xl)?;
    let w = TensorDesc::with_layout(dt, lf, &wl)?;
    let to_i = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let mut conv = s.conv_desc(mode, &to_i(&pads), &to_i(&strides), &to_i(&dils))?;
    conv.set_groups(g as i64)?;
    if mode == ConvMode::Transpose {
        conv.set_out_pads(&to_i(&out_pads))?;
    }
    // Int8 inputs give f32 outputs (MIOpen's GetForwardOutputTensor).
    let y_dt = if dt == DataType::Int8 { DataType::Float } else { dt };
    let y = TensorDesc::with_layout(y_dt, lo, &conv.output_lens(&x, &w)?)?;
    Ok(Geometry { x, w, y, conv })
}

/// A (non-transpose) filter must fit in the padded input: MIOpen would clamp the output to
/// one element and compute something nobody asked for.
pub fn check_fits(input: &[usize], pads: &[usize], fil: &[usize], dils: &[usize]) -> Res<()> {
    for i in 0..input.len() {
        let extent = dils[i] * (fil[i] - 1) + 1;
        if input[i] + 2 * pads[i] < extent {
            return Err(format!(
                "impossible convolution: filter extent {extent} (filter {}, dilation {}) exceeds the padded input {} (input {} + 2*pad {}) in spatial dim {i}",
                fil[i], dils[i], input[i] + 2 * pads[i], input[i], pads[i]
            )
            .into());
        }
    }
    Ok(())
}

/// The solver choice of `-S`: a negative number means Find, 0 immediate mode's best, a
/// positive number a solution id, anything else a solver name.
enum Pick {
    Find,
    Immediate,
    Id(u64),
}

fn parse_solution(s: &str) -> Res<Pick> {
    match s.trim().parse::<i64>() {
        Ok(v) if v < 0 => Ok(Pick::Find),
        Ok(0) => Ok(Pick::Immediate),
        Ok(v) => Ok(Pick::Id(v as u64)),
        Err(_) => {
            let solver = find_by_name(s.trim()).ok_or_else(|| format!("--solution {s}: no solver of that name (see --list-solvers)"))?;
            Ok(Pick::Id(solver.solution_id()))
        }
    }
}

/// Host data and device buffers of one run.
struct Data {
    xv: Vec<f64>,
    wv: Vec<f64>,
    dyv: Vec<f64>,
    xb: Buffer,
    wb: Buffer,
    yb: Buffer,
    dyb: Buffer,
    dxb: Buffer,
    dwb: Buffer,
}

pub fn run(s: &Session, a: &ConvArgs, dt: DataType) -> Res<()> {
    if !(0..=6).contains(&a.forw) {
        return Err(format!("--forw must be 0..6, got {}", a.forw).into());
    }
    if a.iter < 1 {
        return Err("Fatal: Number of iterations must be > 0".into());
    }
    warn_unimplemented(s, a);
    let g = geometry(s, a, dt)?;
    let int8 = dt == DataType::Int8;
    if int8 && a.forw != 0 && a.forw & 1 == 0 {
        return Err(format!("convint8: --forw {} asks for backward only; int8 convolutions are forward only (MIOpen: BadParm)", a.forw).into());
    }
    let dirs: Vec<Dir> = [(1, Dir::Fwd), (2, Dir::Bwd), (4, Dir::Wrw)]
        .into_iter()
        .filter(|(bit, _)| (a.forw == 0 || a.forw & bit != 0) && (!int8 || *bit == 1))
        .map(|(_, d)| d)
        .collect();
    if int8 && a.forw != 1 {
        s.out.line("convint8: int8 convolutions are forward only (MIOpen: BadParm for backward); running forward");
    }
    let bias = a.bias.trim() == "1" && !int8;
    s.out.set("problem", json!({ "op": "conv", "dtype": dt.short(), "x": g.x.lens(), "w": g.w.lens(), "y": g.y.lens(),
        "layout": g.x.packed_layout().map(|l| l.name()), "conv": g.conv.key() }));
    if s.list_solvers {
        for d in &dirs {
            let fp = FusedProblem::conv(problem(&g, *d)?);
            list_solvers(s, d.names().1, &fp);
        }
        return Ok(());
    }
    let pick = parse_solution(&a.solution)?;
    let fan_in = (g.w.element_count() / g.w.n().max(1)) as f64;
    // int8: integers in [-8, 8], whose sums f32 holds exactly for any layer the driver takes.
    let (xr, ws) = if int8 { (8.0, 8.0) } else { (1.0, 1.0 / fan_in.sqrt()) };
    let xv = s.uniform(&g.x, -xr, xr);
    let wv = s.uniform(&g.w, -ws, ws);
    let dyv = s.uniform(&g.y, -1.0, 1.0);
    let d = Data {
        xb: s.upload(&g.x, &xv)?,
        wb: s.upload(&g.w, &wv)?,
        yb: s.zeros(&g.y)?,
        dyb: s.upload(&g.y, &dyv)?,
        dxb: s.zeros(&g.x)?,
        dwb: s.zeros(&g.w)?,
        xv,
        wv,
        dyv,
    };
    for dir in dirs {
        run_direction(s, a, &g, &d, dir, &pick)?;
        if bias && dir == Dir::Fwd {
            run_bias(s, a, &g, &d, true)?;
        }
    }
    if bias && (a.forw == 0 || a.forw & 2 != 0) {
        run_bias(s, a, &g, &d, false)?;
    }
    Ok(())
}

/// The problem of a direction in normal roles (what solvers see).
fn problem(g: &Geometry, d: Dir) -> Res<ConvProblem> {
    Ok(match d {
        Dir::Fwd => ConvProblem::forward(&g.conv, &g.x, &g.w, &g.y)?,
        Dir::Bwd => ConvProblem::backward_data(&g.conv, &g.y, &g.w, &g.x)?,
        Dir::Wrw => ConvProblem::backward_weights(&g.conv, &g.y, &g.x, &g.w)?,
    })
}

fn run_direction(s: &Session, a: &ConvArgs, g: &Geometry, d: &Data, dir: Dir, pick: &Pick) -> Res<()> {
    let (vname, tname, sname, bit) = dir.names();
    let p = problem(g, dir)?;
    let h = &s.handle;
    let ws_bytes = conv::workspace_size(h, &p).map_err(|e| format!("{vname}: not supported: {e}"))?;
    let wsb = h.alloc(ws_bytes.max(1))?;
    let ws = Workspace { ptr: wsb.ptr(), bytes: ws_bytes };
    let c = &g.conv;
    let exec = |choice: Choice| -> conflux::Result<()> {
        match dir {
            Dir::Fwd => conv::forward(h, c, &g.x, d.xb.ptr(), &g.w, d.wb.ptr(), &g.y, d.yb.ptr(), 1.0, 0.0, choice, ws),
            Dir::Bwd => conv::backward_data(h, c, &g.y, d.dyb.ptr(), &g.w, d.wb.ptr(), &g.x, d.dxb.ptr(), 1.0, 0.0, choice, ws),
            Dir::Wrw => conv::backward_weights(h, c, &g.y, d.dyb.ptr(), &g.x, d.xb.ptr(), &g.w, d.dwb.ptr(), 1.0, 0.0, choice, ws),
        }
    };
    let id = choose(s, a, g, d, dir, pick, &p, ws)?;
    let solver = find_by_id(id).map(|x| x.name()).unwrap_or("?");
    exec(Choice::Solution(id)).map_err(|e| format!("{vname}: {e}"))?;
    s.out.push("runs", json!({ "op": sname, "solution_id": id, "solver": solver, "workspace": ws_bytes }));

    if a.verify != 0 {
        let (out_desc, out_buf) = match dir {
            Dir::Fwd => (&g.y, &d.yb),
            Dir::Bwd => (&g.x, &d.dxb),
            Dir::Wrw => (&g.w, &d.dwb),
        };
        let mut want = vec![0.0; out_desc.element_space()];
        match dir {
            Dir::Fwd => r::conv_forward(c, &g.x, &d.xv, &g.w, &d.wv, &g.y, &mut want)?,
            Dir::Bwd => r::conv_backward_data(c, &g.y, &d.dyv, &g.w, &d.wv, &g.x, &mut want)?,
            Dir::Wrw => r::conv_backward_weights(c, &g.y, &d.dyv, &g.x, &d.xv, &g.w, &mut want)?,
        }
        let mut got = s.download(out_buf, out_desc.dtype(), want.len())?;
        // Weight gradients reduce over N·H·W terms: MIOpen doubles their tolerance too.
        let scale = if dir == Dir::Wrw { 2.0 } else { 1.0 };
        verify::check(s, vname, Style::Conv, bit, &mut got, &want, out_desc.dtype(), scale);
    }

    if a.time != 0 {
        let t = timing::time(s, a.iter as usize, || exec(Choice::Solution(id)).map_err(Into::into))?;
        let flops = 2.0 * p.macs();
        let (read, written) = match dir {
            Dir::Fwd => (g.x.num_bytes() + g.w.num_bytes(), g.y.num_bytes()),
            Dir::Bwd => (g.y.num_bytes() + g.w.num_bytes(), g.x.num_bytes()),
            Dir::Wrw => (g.x.num_bytes() + g.y.num_bytes(), g.w.num_bytes()),
        };
        let (gf, gb) = rates(flops, (read + written) as f64, &t);
        let algo = find_by_id(id).map(|x| x.algorithm().name()).unwrap_or("?");
        s.out.line(format!("MIOpen {tname} Algorithm: {algo}, Solution: {id}/{solver}"));
        s.out.line(format!("{} Kernel Time {tname} Elapsed: {:.6} ms (average)", s.dev_label(), t.avg_ms));
        s.out.line(format!("{} Kernel Min Time {tname} Elapsed: {:.6} ms", s.dev_label(), t.min_ms));
        if a.wall != 0 {
            s.out.line(format!("Wall-clock Time {tname} Elapsed: {:.6} ms", t.wall_ms));
        }
        let sp = g.y.spatial();
        let (ho, wo) = (sp[sp.len() - 2], sp[sp.len() - 1]);
        let fs = g.w.spatial();
        let (fy, fx) = (fs[fs.len() - 2], fs[fs.len() - 1]);
        let u = c.strides()[c.strides().len() - 2];
        s.out.line("stats: name, n, c, ho, wo, x, y, k, flopCnt, bytesRead, bytesWritten, GFLOPs, GB/s, timeMs");
        s.out.line(format!(
            "stats: {sname}-conv{fy}x{fx}u{u}, {}, {}, {ho}, {wo}, {fx}, {fy}, {}, {flops:.0}, {read}, {written}, {gf:.2}, {gb:.2}, {:.6}",
            g.x.n(),
            g.x.c(),
            g.y.c(),
            t.avg_ms
        ));
        let roof = timing::roofline(s, g.x.dtype(), flops, (read + written) as f64, &t);
        if let Some(f) = roof {
            s.out.line(format!("roofline: {:.1}% of the device's peak for {tname}", f * 100.0));
        }
        s.out.push("timing", timing::to_json(sname, flops, (read + written) as f64, &t, roof));
    }
    Ok(())
}

/// The solution id to run: Find's fastest (`-S` < 0), immediate mode's first (`-S 0`), or the
/// given id. Find and immediate mode print their candidates.
#[allow(clippy::too_many_arguments)]
fn choose(s: &Session, a: &ConvArgs, g: &Geometry, d: &Data, dir: Dir, pick: &Pick, p: &ConvProblem, ws: Workspace) -> Res<u64> {
    let (vname, tname, _, _) = dir.names();
    let h = &s.handle;
    let c = &g.conv;
    match pick {
        Pick::Id(id) => Ok(*id),
        Pick::Find => {
            let exhaustive = a.search != 0;
            let perfs = match dir {
                Dir::Fwd => conv::find_forward(h, c, &g.x, d.xb.ptr(), &g.w, d.wb.ptr(), &g.y, d.yb.ptr(), 16, exhaustive, ws),
                Dir::Bwd => conv::find_backward_data(h, c, &g.y, d.dyb.ptr(), &g.w, d.wb.ptr(), &g.x, d.dxb.ptr(), 16, exhaustive, ws),
                Dir::Wrw => conv::find_backward_weights(h, c, &g.y, d.dyb.ptr(), &g.x, d.xb.ptr(), &g.w, d.dwb.ptr(), 16, exhaustive, ws),
            }
            .map_err(|e| format!("{vname}: Find failed: {e}"))?;
            if a.search != 0 {
                s.out.line(format!("Find {tname}: {} candidates timed", perfs.len()));
                for pf in &perfs {
                    s.out.line(format!("- id: {} algo: {}, time: {:.6} ms, ws: {}, name: {}", pf.solution_id, pf.algorithm.name(), pf.time_ms, pf.workspace_bytes, pf.solver));
                }
            }
            let best = perfs.first().ok_or_else(|| format!("{vname}: Find returned no solution"))?;
            if a.search != 0 {
                s.out.line(format!("Chosen {tname} solver: {} (id {})", best.solver, best.solution_id));
            }
            Ok(best.solution_id)
        }
        Pick::Immediate => {
            let sols = conv::solutions(h, p, 64).map_err(|e| format!("{vname}: {e}"))?;
            let dname = match dir {
                Dir::Fwd => "Forward Conv",
                Dir::Bwd => "Backward Data Conv",
                Dir::Wrw => "Backward Weights Conv",
            };
            s.out.line(format!("{dname} solutions available: {}", sols.len()));
            for x in &sols {
                let name = find_by_id(x.solution_id).map(|v| v.name()).unwrap_or("?");
                s.out.line(format!("- id: {} algo: {}, time: {} ms, ws: {}, name: {name}", x.solution_id, x.algorithm.name(), x.time_ms, x.workspace_bytes));
            }
            Ok(sols.first().ok_or_else(|| format!("{vname}: no solution"))?.solution_id)
        }
    }
}

/// Forward bias on y (after the forward convolution) or backward bias from dy, verified.
fn run_bias(s: &Session, a: &ConvArgs, g: &Geometry, d: &Data, forward: bool) -> Res<()> {
    let rank = g.y.rank();
    let mut bl = vec![1; rank];
    bl[1] = g.y.c();
    let bdesc = TensorDesc::new(g.y.dtype(), &bl)?;
    let h = &s.handle;
    if forward {
        let bv = s.uniform(&bdesc, -1.0, 1.0);
        let bb = s.upload(&bdesc, &bv)?;
        let before = s.download(&d.yb, g.y.dtype(), g.y.element_space())?;
        conv::bias::forward_bias(h, 1.0, &bdesc, bb.ptr(), 0.0, &g.y, d.yb.ptr())?;
        if a.verify != 0 {
            let mut want = before;
            r::bias_forward(&g.y, &mut want, &bdesc, &bv)?;
            let mut got = s.download(&d.yb, g.y.dtype(), want.len())?;
            verify::check(s, "Forward Convolution Bias", Style::Conv, verify::OTHER, &mut got, &want, g.y.dtype(), 1.0);
        }
    } else {
        let dbb = s.zeros(&bdesc)?;
        conv::bias::backward_bias(h, 1.0, &g.y, d.dyb.ptr(), 0.0, &bdesc, dbb.ptr())?;
        if a.verify != 0 {
            let mut want = vec![0.0; bdesc.element_space()];
            r::bias_backward(&g.y, &d.dyv, &bdesc, &mut want)?;
            let mut got = s.download(&dbb, bdesc.dtype(), want.len())?;
            verify::check(s, "Backward Convolution Bias", Style::Conv, verify::OTHER, &mut got, &want, bdesc.dtype(), 2.0);
        }
    }
    Ok(())
}

/// Flags MIOpenDriver has that conflux accepts for script compatibility but does not act on.
fn warn_unimplemented(s: &Session, a: &ConvArgs) {
    let set = [
        ("--in_data", !a.in_data.is_empty()),
        ("--weights", !a.weights.is_empty()),
        ("--dout_data", !a.dout_data.is_empty()),
        ("--in_bias", !a.in_bias.is_empty()),
        ("--dump_output", a.dump_output != 0),
        ("--verification_cache", !a.verification_cache.is_empty()),
        ("--gpualloc", a.gpualloc != 0),
        ("--tensor_vect", a.tensor_vect != 0),
        ("--in_cast_type/--out_cast_type/--wei_cast_type", a.in_cast_type != "-1" || a.out_cast_type != "-1" || a.wei_cast_type != "-1"),
    ];
    for (name, on) in set {
        if on {
            s.out.line(format!("Warning: {name} is accepted for compatibility but not implemented by conflux-driver; ignored"));
        }
    }
}
