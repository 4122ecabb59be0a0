//! `bench_cpu bwd LIST N [DNNL_BWD|-] [nchw|nhwc]`: fp32 forward, backward-data and
//! backward-weights on the CPU (NCHW unless told), one row per problem
//! (`C-H-W-K-fy-fx-py-px[-sy-sx-g-dy-dx]`): conflux's immediate choice for each direction, a column per backward-data solver that takes the problem (median µs and
//! direct-equivalent GFLOP/s, so the solvers can be weighed in one run), and with the path of
//! `bench/cpu-peer-bwd/dnnl_bwd` oneDNN's backward primitives measured right after, in the same
//! run (its "any" layouts and forced NCHW).

use conflux::conv::{api, Choice, Workspace};
use conflux::element::encode;
use conflux::fusion::FusedProblem;
use conflux::reference::fill::fill_normal;
use conflux::{ConvDesc, ConvMode, ConvProblem, DataType, Handle, Layout, TensorDesc};

/// (solution id, name) of the backward-data solvers compared.
const SOLVERS: [(u64, &str); 4] = [(7, "WinogradF4x3"), (5, "Gemm"), (6, "Direct"), (12, "DepthwiseNhwc")];

/// oneDNN's median µs per (direction, variant) for one problem, from dnnl_bwd's CSV.
fn onednn(bin: &str, n: usize, cfg: &str) -> Vec<(String, String, f64)> {
    let out = std::process::Command::new(bin).args([&n.to_string(), "10", "0.3", cfg]).output().expect("run dnnl_bwd");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() == 6).then(|| (f[2].to_string(), f[3].to_string(), f[4].parse().unwrap_or(f64::NAN)))
        })
        .collect()
}

pub fn run(a: &[String]) {
    let list = std::fs::read_to_string(&a[0]).expect("problem list");
    let n: usize = a[1].parse().expect("N");
    let peer = a.get(2).filter(|p| p.as_str() != "-");
    let layout = if a.get(3).is_some_and(|l| l == "nhwc") { Layout::NHWC } else { Layout::NCHW };
    let h = Handle::cpu();
    let dt = DataType::Float;
    let peer_cols = if peer.is_some() { " oneDNN dx any | oneDNN dx nchw | oneDNN dw any | oneDNN dw nchw |" } else { "" };
    println!("| config ({layout:?}) | N | fwd auto µs | dx auto µs | dw auto µs | {} |{peer_cols}", SOLVERS.map(|s| format!("dx {} µs (GFLOP/s)", s.1)).join(" | "));
    println!("|---|---:|---:|---:|---:|{}{}", "---:|".repeat(SOLVERS.len()), if peer.is_some() { "---:|".repeat(4) } else { String::new() });
    for line in list.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
        let v: Vec<usize> = line.split('-').map(|t| t.parse().unwrap()).collect();
        // Lists with a leading batch size (zoo_public.txt) carry 14 fields: drop it.
        let v = if v.len() == 14 { &v[1..] } else { &v[..] };
        let (c, hh, ww, k, fy, fx, py, px) = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
        let (sy, sx, g, dy, dx_) = if v.len() >= 13 { (v[8], v[9], v[10], v[11], v[12]) } else { (1, 1, 1, 1, 1) };
        let cfg = format!("{c}-{hh}-{ww}-{k}-{fy}-{fx}-{py}-{px}-{sy}-{sx}-{g}-{dy}-{dx_}");
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[py as i64, px as i64], &[sy as i64, sx as i64], &[dy as i64, dx_ as i64]).unwrap();
        conv.set_groups(g as i64).unwrap();
        let dx = TensorDesc::with_layout(dt, layout, &[n, c, hh, ww]).unwrap();
        let w = TensorDesc::with_layout(dt, layout, &[k, c / g, fy, fx]).unwrap();
        let dy_d = TensorDesc::with_layout(dt, layout, conv.output_desc(&dx, &w).unwrap().lens()).unwrap();
        let up = |d: &TensorDesc, seed| {
            let mut b = h.alloc(d.num_bytes()).unwrap();
            h.write(&mut b, &encode(dt, &fill_normal(seed, d.element_space()))).unwrap();
            b
        };
        let (dyb, wb, dxb) = (up(&dy_d, 1), up(&w, 2), up(&dx, 3));
        let problem = FusedProblem::conv(ConvProblem::backward_data(&conv, &dy_d, &w, &dx).unwrap());
        let flops = 2.0 * problem.conv_problem().unwrap().macs();
        let data = |choice| super::conv::time_us(|| api::backward_data(&h, &conv, &dy_d, dyb.ptr(), &w, wb.ptr(), &dx, dxb.ptr(), 1.0, 0.0, choice, Workspace::default()).unwrap());
        let auto_fwd = super::conv::time_us(|| api::forward(&h, &conv, &dx, dxb.ptr(), &w, wb.ptr(), &dy_d, dyb.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap());
        let auto_dx = data(Choice::Auto);
        let auto_dw = super::conv::time_us(|| {
            api::backward_weights(&h, &conv, &dy_d, dyb.ptr(), &dx, dxb.ptr(), &w, wb.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap()
        });
        let cells: Vec<String> = SOLVERS
            .iter()
            .map(|&(id, _)| {
                let Some(solver) = conflux::solver::find_by_id(id) else { return "–".to_string() };
                if solver.check(&problem, h.device().info()).is_err() {
                    return "–".to_string();
                }
                let us = data(Choice::Solution(id));
                format!("{us:.0} ({:.0})", flops / us * 1e-3)
            })
            .collect();
        let peer_cells = peer.map_or(String::new(), |bin| {
            let rows = onednn(bin, n, &cfg);
            let get = |d: &str, v: &str| rows.iter().find(|r| r.0 == d && r.1 == v).map_or("–".to_string(), |r| format!("{:.0}", r.2));
            format!(" {} | {} | {} | {} |", get("data", "any"), get("data", "nchw"), get("weights", "any"), get("weights", "nchw"))
        });
        println!("| {cfg} | {n} | {auto_fwd:.0} | {auto_dx:.0} | {auto_dw:.0} | {} |{peer_cells}", cells.join(" | "));
    }
}
