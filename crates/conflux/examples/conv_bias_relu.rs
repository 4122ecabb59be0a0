//! The main job in miniature: describe conv → bias → ReLU once, compile it into one fused
//! kernel, run it many times, check it against the f64 reference. Uses the GPU when one is
//! present (`CONFLUX_DEVICE=cpu` forces the CPU).
//!
//! cargo run --release --example conv_bias_relu

use conflux::element::{decode, encode, round_to};
use conflux::reference::{compare, fill};
use conflux::{ActivationMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};
use std::time::Instant;

fn main() -> conflux::Result<()> {
    let handle = Handle::new()?;
    let dt = DataType::Float;
    let (n, c, h, w, k) = (4, 32, 28, 28, 64);
    let x_desc = TensorDesc::new(dt, &[n, c, h, w])?;
    let w_desc = TensorDesc::new(dt, &[k, c, 3, 3])?;
    let b_desc = TensorDesc::new(dt, &[1, k, 1, 1])?;
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1])?;

    let mut plan = FusionPlan::new(FusionDirection::Vertical, x_desc.clone());
    plan.add_conv_forward(&conv, &w_desc)?;
    plan.add_bias(&b_desc)?;
    plan.add_activation(ActivationMode::Relu)?;
    let y_desc = plan.output_desc().clone();
    let t = Instant::now();
    plan.compile(&handle)?;
    let compile_ms = t.elapsed().as_secs_f64() * 1e3;

    // Random inputs, rounded to the element type so the reference sees the same values.
    let mk = |d: &TensorDesc, seed| -> Vec<f64> { fill::fill_normal(seed, d.element_space()).iter().map(|&v| round_to(dt, v)).collect() };
    let (xv, wv, bv) = (mk(&x_desc, 1), mk(&w_desc, 2), mk(&b_desc, 3));
    let upload = |v: &[f64], d: &TensorDesc| -> conflux::Result<conflux::Buffer> {
        let mut b = handle.alloc(d.num_bytes())?;
        handle.write(&mut b, &encode(dt, v))?;
        Ok(b)
    };
    let (xb, wb, bb) = (upload(&xv, &x_desc)?, upload(&wv, &w_desc)?, upload(&bv, &b_desc)?);
    let yb = handle.alloc(y_desc.num_bytes())?;

    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: wb.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(1, OpArg::Bias { b: bb.ptr() });
    args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });

    plan.execute(&handle, &x_desc, xb.ptr(), &y_desc, yb.ptr(), &args)?; // warm-up
    handle.synchronize()?;
    let iters = 20;
    let t = Instant::now();
    for _ in 0..iters {
        plan.execute(&handle, &x_desc, xb.ptr(), &y_desc, yb.ptr(), &args)?;
    }
    handle.synchronize()?;
    let run_ms = t.elapsed().as_secs_f64() * 1e3 / iters as f64;

    let y = decode(dt, &handle.read(&yb)?);
    let mut want = vec![0.0; y_desc.element_space()];
    conflux::reference::fused::conv_bias_act_forward(
        1.0, &conv, &x_desc, &xv, &w_desc, &wv, 0.0, None, Some((&b_desc, &bv)),
        &conflux::ActivationDesc::relu(), &y_desc, &mut want,
    )?;
    let err = compare::rel_l2_error(&y, &want);
    let checksum: f64 = y.iter().sum();
    let flops = 2.0 * (n * k * h * w * c * 9) as f64;
    println!("device      {}", handle.device().name());
    println!("plan        conv 3x3 + bias + relu  ({}), solver {}", plan.problem()?.short_name(), plan.solver_name().unwrap_or("?"));
    println!("x {:?}  w {:?}  y {:?}", x_desc.lens(), w_desc.lens(), y_desc.lens());
    println!("compile     {compile_ms:.1} ms");
    println!("execute     {run_ms:.3} ms  ({:.1} GFLOP/s)", flops / run_ms / 1e6);
    println!("checksum    {checksum:.6}");
    println!("rel L2 err  {err:.2e} vs f64 reference ({})", if compare::check(&y, &want, compare::tolerance(dt)).is_ok() { "OK" } else { "FAILED" });
    if compare::check(&y, &want, compare::tolerance(dt)).is_err() {
        std::process::exit(1);
    }
    Ok(())
}
