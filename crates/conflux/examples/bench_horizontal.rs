//! Horizontal fusion benchmark (not a test): the 1×1 branches of Inception-v3's blocks that
//! read the same x (1×1 conv + bias + ReLU each) as one horizontal plan against one vertical
//! plan per branch, same handle, same run, interleaved; medians of timed rounds.
//!   bench_horizontal N DTYPE LAYOUT [ROUNDS]    DTYPE f32|f16|bf16, LAYOUT nchw|nhwc
//! The handle is Handle::new()'s (CONFLUX_DEVICE=cpu|cuda).

use conflux::element::encode;
use conflux::reference::fill;
use conflux::{ActivationMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, Layout, OpArg, OpArgs, TensorDesc};

/// (input channels, size, output channels of each 1×1 branch)
const BLOCKS: [(usize, usize, [usize; 3]); 5] = [
    (192, 35, [64, 48, 64]),
    (288, 35, [64, 48, 64]),
    (768, 17, [192, 160, 160]),
    (1280, 8, [320, 384, 448]),
    (2048, 8, [320, 384, 448]),
];

fn main() -> conflux::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let dt = match a.get(2).map(String::as_str) {
        Some("f16") => DataType::Half,
        Some("bf16") => DataType::BFloat16,
        _ => DataType::Float,
    };
    let nhwc = a.get(3).map(String::as_str) == Some("nhwc");
    let rounds: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(30);
    let handle = Handle::new()?;
    let desc = |lens: &[usize]| if nhwc { TensorDesc::with_layout(dt, Layout::NHWC, lens) } else { TensorDesc::new(dt, lens) };
    println!("device {} N={n} {dt:?} {}", handle.device().name(), if nhwc { "NHWC" } else { "NCHW" });
    println!("| block | branches K | horizontal µs | separate µs | separate / horizontal |");
    println!("|---|---|---:|---:|---:|");
    let conv = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1])?;
    let upload = |d: &TensorDesc, seed: u64| -> conflux::Result<conflux::Buffer> {
        let v = fill::fill_normal(seed, d.element_space());
        let mut b = handle.alloc(d.num_bytes())?;
        handle.write(&mut b, &encode(dt, &v))?;
        Ok(b)
    };
    for (c, s, ks) in BLOCKS {
        let x = desc(&[n, c, s, s])?;
        let xb = upload(&x, 1)?;
        let mut horizontal = FusionPlan::new(FusionDirection::Horizontal, x.clone());
        let (mut separate, mut bufs, mut hargs, mut sargs) = (Vec::new(), Vec::new(), OpArgs::new(), Vec::new());
        for (i, &k) in ks.iter().enumerate() {
            let w = desc(&[k, c, 1, 1])?;
            let b = TensorDesc::new(dt, &[1, k, 1, 1])?;
            let (wb, bb) = (upload(&w, 10 + i as u64)?, upload(&b, 20 + i as u64)?);
            horizontal.add_conv_forward(&conv, &w)?;
            horizontal.add_bias(&b)?;
            horizontal.add_activation(ActivationMode::Relu)?;
            let mut p = FusionPlan::new(FusionDirection::Vertical, x.clone());
            p.add_conv_forward(&conv, &w)?;
            p.add_bias(&b)?;
            p.add_activation(ActivationMode::Relu)?;
            p.compile(&handle)?;
            let mut args = OpArgs::new();
            for (j, at) in [(0, 0), (1, 1), (2, 2)] {
                let arg = match j {
                    0 => OpArg::Conv { w: wb.ptr(), alpha: 1.0, beta: 0.0 },
                    1 => OpArg::Bias { b: bb.ptr() },
                    _ => OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 },
                };
                args.set(at, arg);
                hargs.set(3 * i + at, arg);
            }
            let y = p.output_desc().clone();
            let yb = handle.alloc(y.num_bytes())?;
            separate.push((p, y, yb));
            sargs.push(args);
            bufs.push((wb, bb));
        }
        horizontal.compile(&handle)?;
        let hy = horizontal.output_desc().clone();
        let hyb = handle.alloc(hy.num_bytes())?;
        let run_h = || horizontal.execute(&handle, &x, xb.ptr(), &hy, hyb.ptr(), &hargs);
        let run_s = || -> conflux::Result<()> {
            for ((p, y, yb), args) in separate.iter().zip(&sargs) {
                p.execute(&handle, &x, xb.ptr(), y, yb.ptr(), args)?;
            }
            Ok(())
        };
        let (mut th, mut ts) = (Vec::new(), Vec::new());
        for round in 0..rounds + 3 {
            let h = handle.measure_ms(|| (0..10).try_for_each(|_| run_h()))? as f64 * 100.0;
            let sp = handle.measure_ms(|| (0..10).try_for_each(|_| run_s()))? as f64 * 100.0;
            if round >= 3 {
                th.push(h);
                ts.push(sp);
            }
        }
        let med = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        };
        let (h, sp) = (med(th), med(ts));
        println!("| {c}-{s}-{s} | {ks:?} | {h:.1} | {sp:.1} | {:.2} |", sp / h);
    }
    Ok(())
}
