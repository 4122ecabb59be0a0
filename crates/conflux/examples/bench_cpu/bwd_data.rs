//! `bench_cpu bwd LIST N`: fp32 backward-data (dx = conv_bwd_data(dy, w)) on the CPU, NCHW, one
//! row per problem and a column per backward-data solver that takes it (median µs and
//! direct-equivalent GFLOP/s), so Winograd F(4×4)'s flipped-filter path can be weighed
//! against GEMM + col2im in the same run.

use conflux::conv::{api, Choice, Workspace};
use conflux::element::encode;
use conflux::fusion::FusedProblem;
use conflux::reference::fill::fill_normal;
use conflux::{ConvDesc, ConvMode, ConvProblem, DataType, Handle, Layout, TensorDesc};

/// (solution id, name) of the solvers compared.
const SOLVERS: [(u64, &str); 3] = [(7, "WinogradF4x3"), (5, "Gemm"), (6, "Direct")];

pub fn run(a: &[String]) {
    let list = std::fs::read_to_string(&a[0]).expect("problem list");
    let n: usize = a[1].parse().expect("N");
    let h = Handle::cpu();
    let dt = DataType::Float;
    println!("| config C-H-W-K-fy-fx-py-px | N | {} |", SOLVERS.map(|s| format!("{} µs (GFLOP/s)", s.1)).join(" | "));
    println!("|---|---:|{}", "---:|".repeat(SOLVERS.len()));
    for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let v: Vec<usize> = line.split('-').map(|t| t.parse().unwrap()).collect();
        let (c, hh, ww, k, fy, fx, py, px) = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
        let conv = ConvDesc::new(ConvMode::Convolution, &[py as i64, px as i64], &[1, 1], &[1, 1]).unwrap();
        let dx = TensorDesc::with_layout(dt, Layout::NCHW, &[n, c, hh, ww]).unwrap();
        let w = TensorDesc::with_layout(dt, Layout::NCHW, &[k, c, fy, fx]).unwrap();
        let dy = TensorDesc::with_layout(dt, Layout::NCHW, conv.output_desc(&dx, &w).unwrap().lens()).unwrap();
        let up = |d: &TensorDesc, seed| {
            let mut b = h.alloc(d.num_bytes()).unwrap();
            h.write(&mut b, &encode(dt, &fill_normal(seed, d.element_space()))).unwrap();
            b
        };
        let (dyb, wb, dxb) = (up(&dy, 1), up(&w, 2), up(&dx, 3));
        let problem = FusedProblem::conv(ConvProblem::backward_data(&conv, &dy, &w, &dx).unwrap());
        let flops = 2.0 * problem.conv_problem().unwrap().macs();
        let cells: Vec<String> = SOLVERS
            .iter()
            .map(|&(id, _)| {
                let solver = conflux::solver::find_by_id(id).unwrap();
                if solver.check(&problem, h.device().info()).is_err() {
                    return "–".to_string();
                }
                let us = super::conv::time_us(|| {
                    api::backward_data(&h, &conv, &dy, dyb.ptr(), &w, wb.ptr(), &dx, dxb.ptr(), 1.0, 0.0, Choice::Solution(id), Workspace::default()).unwrap()
                });
                format!("{us:.0} ({:.0})", flops / us * 1e-3)
            })
            .collect();
        println!("| {line} | {n} | {} |", cells.join(" | "));
    }
}
