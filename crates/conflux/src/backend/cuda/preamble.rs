//! The small generated part of every kernel source: type and size constants, the epilogue
//! function for the problem's op chain, and the activation macros. Everything else is the
//! hand-written `.cu` templates under `kernels/`.

use super::params::{s5, EpiArgC, Params, MAX_EPI};
use crate::problem::op_args::need_ptr;
use crate::problem::{strides5, Geom};
use crate::error::{Error, Result};
use crate::problem::{EpiOp, OpArg};
use crate::types::{ActivationMode, BnMode, DataType};
use std::fmt::Write;

const COMMON: &str = include_str!("kernels/common.cuh");
/// conflux's extension activations, beside MIOpen's in common.cuh.
const ACT_MODERN: &str = include_str!("kernels/act_modern.cuh");
/// int8 / fp8 element types, for the quantized convolution kernels.
const QUANT: &str = include_str!("kernels/quant.cuh");

/// CUDA type name of an element type.
pub fn ctype(dt: DataType) -> Result<&'static str> {
    Ok(match dt {
        DataType::Float => "float",
        DataType::Half => "h16",
        DataType::BFloat16 => "b16",
        other => return Err(Error::not_implemented(format!("CUDA backend: element type {other:?} not supported"))),
    })
}

/// Name suffix of the activation functions in common.cuh and act_modern.cuh.
pub fn act_name(mode: ActivationMode) -> &'static str {
    match mode {
        ActivationMode::PassThru => "passthru",
        ActivationMode::Logistic => "logistic",
        ActivationMode::Tanh => "tanh",
        ActivationMode::Relu => "relu",
        ActivationMode::SoftRelu => "softrelu",
        ActivationMode::Abs => "abs",
        ActivationMode::Power => "power",
        ActivationMode::ClippedRelu => "clippedrelu",
        ActivationMode::LeakyRelu => "leakyrelu",
        ActivationMode::Elu => "elu",
        ActivationMode::Silu => "silu",
        ActivationMode::HardSwish => "hardswish",
        ActivationMode::HardSigmoid => "hardsigmoid",
        ActivationMode::Gelu => "gelu",
        ActivationMode::GeluTanh => "gelu_tanh",
        ActivationMode::Mish => "mish",
    }
}

/// Options of a kernel source beyond the element type and the epilogue.
#[derive(Default)]
pub struct Extra<'a> {
    pub act: Option<ActivationMode>,
    pub defines: &'a [(&'a str, String)],
}

/// Full source: defines, common.cuh, act_modern.cuh, the generated epilogue, then `template`.
pub fn source(dt: DataType, epilogue: &[EpiOp], extra: &Extra, template: &str) -> Result<String> {
    source_typed(&[("CONFLUX_T", ctype(dt)?)], None, epilogue, extra, template)
}

/// CUDA container of an element type a quantized convolution reads or writes (quant.cuh),
/// beside the compute types.
fn storage_ctype(dt: DataType) -> Result<&'static str> {
    Ok(match dt {
        DataType::Int8 => "s8",
        DataType::Int32 => "s32",
        DataType::Float8 => "e4m3",
        DataType::BFloat8 => "e5m2",
        other => ctype(other)?,
    })
}

/// The source of a convolution kernel: as `source` for f32 / f16 / bf16 problems; for int8 and
/// fp8 ones (`quant.rs`) CONFLUX_T is x's type, CONFLUX_TW w's and CONFLUX_TY y's, with
/// quant.cuh after common.cuh, QUANT_INT8 (i32 products), RAW_I32 (an Int32 y with no
/// epilogue: stored exactly when α = 1, β = 0) and FP8_STOCHASTIC (an fp8 y under the
/// descriptor's stochastic rounding mode).
pub fn conv_source(conv: &crate::problem::ConvProblem, epilogue: &[EpiOp], extra: &Extra, template: &str) -> Result<String> {
    let Some(q) = conv.quant() else { return source(conv.dtype(), epilogue, extra, template) };
    let (x, w, y) = (conv.x.dtype(), conv.w.dtype(), conv.y.dtype());
    let int8 = q == crate::quant::Quant::Int8;
    let stochastic = conv.conv.attribute(crate::types::ConvAttrib::Fp8RoundingMode) == 1 && crate::quant::Fp8::of(y).is_some();
    let types = [("CONFLUX_T", storage_ctype(x)?), ("CONFLUX_TW", storage_ctype(w)?), ("CONFLUX_TY", storage_ctype(y)?)];
    let flags = format!(
        "#define QUANT_INT8 {}\n#define RAW_I32 {}\n#define FP8_STOCHASTIC {}\n",
        int8 as u8,
        (y == DataType::Int32 && epilogue.is_empty()) as u8,
        stochastic as u8
    );
    source_typed(&types, Some(&flags), epilogue, extra, template)
}

fn source_typed(types: &[(&str, &str)], quant_flags: Option<&str>, epilogue: &[EpiOp], extra: &Extra, template: &str) -> Result<String> {
    if epilogue.len() > MAX_EPI {
        return Err(Error::unsupported(format!("CUDA backend: {} epilogue ops; at most {MAX_EPI}", epilogue.len())));
    }
    let mut s = String::new();
    writeln!(s, "// generated preamble").unwrap();
    for (name, t) in types {
        writeln!(s, "#define {name} {t}").unwrap();
    }
    writeln!(s, "#define CONFLUX_PARAMS_SIZE {}", std::mem::size_of::<Params>()).unwrap();
    for (k, v) in extra.defines {
        writeln!(s, "#define {k} {v}").unwrap();
    }
    s.push_str(quant_flags.unwrap_or(""));
    s.push_str(COMMON);
    if quant_flags.is_some() {
        s.push_str(QUANT);
    }
    s.push_str(ACT_MODERN);
    let act = act_name(extra.act.unwrap_or(ActivationMode::PassThru));
    writeln!(s, "#define CONFLUX_ACT(x, a, b, g) act_{act}(x, a, b, g)").unwrap();
    writeln!(s, "#define CONFLUX_ACTB(dy, x, y, a, b, g) actb_{act}(dy, x, y, a, b, g)").unwrap();
    s.push_str(&epilogue_fn(epilogue)?);
    s.push_str("// template\n");
    s.push_str(template);
    Ok(s)
}

/// `conflux_epilogue`: one line per op, in plan order; and `conflux_epilogue_span`, the same
/// chain on V elements that are consecutive in one image (the NCHW chain kernel's vector),
/// which reads per-element BN parameters as vectors and applies every other op element by
/// element.
fn epilogue_fn(ops: &[EpiOp]) -> Result<String> {
    let mut s = String::from(
        "__device__ __forceinline__ float conflux_epilogue(float v, const EpiArg* e, int n, int c, int d, int h, int w, int sp, int sp_size) {\n",
    );
    for (i, op) in ops.iter().enumerate() {
        writeln!(s, "    v = {};", op_expr(op, i)?).unwrap();
    }
    s.push_str("    return v;\n}\n");
    // Whether every per-element parameter array is 16-byte aligned (the span's ALIGNED).
    s.push_str("__device__ __forceinline__ bool conflux_span_aligned(const EpiArg* e) {\n    return true");
    for (i, op) in ops.iter().enumerate() {
        if matches!(op, EpiOp::BnInference { mode: BnMode::PerActivation, .. }) {
            write!(s, " && bn_params_aligned16(e[{i}])").unwrap();
        }
    }
    s.push_str(";\n}\n");
    s.push_str(
        "template <int V, bool ALIGNED> __device__ __forceinline__ void conflux_epilogue_span(float (&vs)[V], const EpiArg* e, int n, const int (&cs)[V], const int (&sps)[V], int sp_size, int H, int W) {\n",
    );
    for (i, op) in ops.iter().enumerate() {
        if let EpiOp::BnInference { mode: BnMode::PerActivation, dtype } = op {
            writeln!(s, "    epi_bn_span<{}, V, ALIGNED>(vs, e[{i}], (i64)cs[0] * sp_size + sps[0]);", ctype(*dtype)?).unwrap();
            continue;
        }
        writeln!(s, "#pragma unroll").unwrap();
        writeln!(s, "    for (int j = 0; j < V; ++j) {{").unwrap();
        match op {
            EpiOp::Activation { .. } => {}
            EpiOp::Bias { .. } | EpiOp::BnInference { .. } => writeln!(s, "        const int c = cs[j];").unwrap(),
            EpiOp::AddTensor { .. } => {
                writeln!(s, "        const int c = cs[j], sp = sps[j], w = sp % W, h = (sp / W) % H, d = sp / (W * H);").unwrap()
            }
        }
        writeln!(s, "        float v = vs[j];").unwrap();
        writeln!(s, "        vs[j] = {};", op_expr(op, i)?).unwrap();
        writeln!(s, "    }}").unwrap();
    }
    s.push_str("}\n");
    Ok(s)
}

/// One op of the chain applied to `v` at (n, c, d, h, w), plane offset `sp`.
fn op_expr(op: &EpiOp, i: usize) -> Result<String> {
    Ok(match op {
        EpiOp::Bias { dtype } => format!("epi_bias<{}>(v, e[{i}], c)", ctype(*dtype)?),
        EpiOp::BnInference { mode, dtype } => {
            let j = if *mode == BnMode::Spatial { "c" } else { "(i64)c * sp_size + sp" };
            format!("epi_bn<{}>(v, e[{i}], {j})", ctype(*dtype)?)
        }
        EpiOp::Activation { mode } => format!("act_{}(v, e[{i}].f[0], e[{i}].f[1], e[{i}].f[2])", act_name(*mode)),
        EpiOp::AddTensor { z } => format!("epi_add<{}>(v, e[{i}], n, c, d, h, w)", ctype(z.dtype())?),
    })
}

/// Kernel arguments of the epilogue ops (plan index of ops[0] is `first_index`).
pub fn epilogue_args(ops: &[EpiOp], args: &[OpArg], first_index: usize) -> Result<[EpiArgC; MAX_EPI]> {
    if ops.len() != args.len() {
        return Err(Error::internal(format!("epilogue: {} ops but {} argument sets", ops.len(), args.len())));
    }
    let mut out = [EpiArgC::default(); MAX_EPI];
    for (i, (op, arg)) in ops.iter().zip(args).enumerate() {
        let at = first_index + i;
        out[i] = match (op, arg) {
            (EpiOp::Bias { .. }, OpArg::Bias { b }) => EpiArgC { p: [need_ptr(*b, "bias", at)?, 0, 0, 0], ..Default::default() },
            (EpiOp::BnInference { .. }, OpArg::BnInference { scale, bias, mean, var, eps }) => EpiArgC {
                p: [
                    need_ptr(*scale, "bn scale", at)?,
                    need_ptr(*bias, "bn bias", at)?,
                    need_ptr(*mean, "bn estimated mean", at)?,
                    need_ptr(*var, "bn estimated variance", at)?,
                ],
                f: [*eps as f32, 0.0, 0.0, 0.0],
                ..Default::default()
            },
            (EpiOp::Activation { .. }, OpArg::Activation { alpha, beta, gamma }) => {
                EpiArgC { f: [*alpha as f32, *beta as f32, *gamma as f32, 0.0], ..Default::default() }
            }
            (EpiOp::AddTensor { z }, OpArg::AddTensor { z: zp, alpha }) => EpiArgC {
                p: [need_ptr(*zp, "residual z", at)?, 0, 0, 0],
                s: s5(strides5(z)),
                f: [*alpha as f32, 0.0, 0.0, 0.0],
            },
            _ => {
                return Err(Error::bad_parm(format!("op {at}: arguments of a {} op given for a {:?} op", arg.kind_name(), op)));
            }
        };
    }
    Ok(out)
}

/// Compile-time geometry of a convolution kernel: spatial sizes, filter, stride, padding,
/// dilation (D, H, W each), channels per group and the x/w/y strides (N, C, D, H, W).
pub fn conv_geometry_defines(g: &Geom) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut add3 = |prefix: &str, v: [usize; 3]| {
        for (axis, val) in ["D", "H", "W"].iter().zip(v) {
            out.push((format!("{prefix}{axis}"), val.to_string()));
        }
    };
    add3("O", g.output);
    add3("I", g.input);
    add3("F", g.filter);
    add3("S", g.stride);
    add3("P", g.pad);
    add3("D", g.dilation);
    out.push(("CG".into(), g.cg().to_string()));
    out.push(("KG".into(), g.kg().to_string()));
    for (prefix, s) in [("XS", g.x_strides), ("WS", g.w_strides), ("YS", g.y_strides)] {
        let lead = if prefix == "WS" { "K" } else { "N" };
        for (axis, val) in [lead, "C", "D", "H", "W"].iter().zip(s) {
            out.push((format!("{prefix}_{axis}"), val.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every activation mode has its forward and backward device functions and reaches the
    /// epilogue and the activation macros; the pointwise kernel's source (chain forward and
    /// activation backward in one file) is generated for each mode, and with
    /// `CONFLUX_KERNEL_SOURCES` set written there for an offline NVRTC compile
    /// (`scripts/nvrtc_check.py`).
    #[test]
    fn every_activation_mode_reaches_the_generated_source() {
        const POINTWISE: &str = include_str!("kernels/pointwise.cu");
        let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
        let defs = [("CONFLUX_NCHW_FLAT", "0".to_string()), ("CONFLUX_CHUNK_FAST", "1".to_string())];
        for &mode in ActivationMode::ALL {
            let n = act_name(mode);
            for dt in [DataType::Float, DataType::Half] {
                let ops = [EpiOp::Bias { dtype: dt }, EpiOp::Activation { mode }];
                let src = source(dt, &ops, &Extra { act: Some(mode), defines: &defs }, POINTWISE).unwrap();
                assert!(src.contains(&format!("float act_{n}(float x")), "{mode:?}: no act_{n}");
                assert!(src.contains(&format!("float actb_{n}(float")), "{mode:?}: no actb_{n}");
                assert!(src.contains(&format!("v = act_{n}(v, e[1].f[0], e[1].f[1], e[1].f[2]);")), "{mode:?}: epilogue");
                assert!(src.contains(&format!("#define CONFLUX_ACTB(dy, x, y, a, b, g) actb_{n}(dy, x, y, a, b, g)")), "{mode:?}: backward macro");
                if let Some(dir) = &out {
                    std::fs::write(format!("{dir}/pointwise_{n}_{}.cu", ctype(dt).unwrap()), src).unwrap();
                }
            }
        }
    }

    fn span_fn(ops: &[EpiOp]) -> String {
        let src = epilogue_fn(ops).unwrap();
        src[src.find("void conflux_epilogue_span").unwrap()..].to_string()
    }

    #[test]
    fn span_epilogue_reads_per_element_bn_as_vectors_and_keeps_plan_order() {
        let bn = |mode| EpiOp::BnInference { mode, dtype: DataType::Float };
        let relu = EpiOp::Activation { mode: ActivationMode::Relu };
        let bias = EpiOp::Bias { dtype: DataType::Half };
        let s = span_fn(&[bias.clone(), bn(BnMode::PerActivation), relu.clone()]);
        let (b, n, a) = (s.find("epi_bias<h16>").unwrap(), s.find("epi_bn_span<float, V, ALIGNED>(vs, e[1]").unwrap(), s.find("act_relu(v, e[2]").unwrap());
        assert!(b < n && n < a, "plan order lost:\n{s}");
        assert!(!s.contains("epi_bn<"), "per-element BN read element by element:\n{s}");
        let s = span_fn(&[bn(BnMode::Spatial), relu]);
        assert!(s.contains("epi_bn<float>(v, e[0], c)") && !s.contains("epi_bn_span"), "spatial BN:\n{s}");
        let all = epilogue_fn(&[bn(BnMode::Spatial), bn(BnMode::PerActivation)]).unwrap();
        assert!(all.contains("return true && bn_params_aligned16(e[1]);"), "alignment check:\n{all}");
    }

    /// No kernel loads global memory through a non-volatile inline asm: the compiler treats
    /// one as a pure function of its address and may run it above the bounds check guarding
    /// it (compute-sanitizer caught bias reads past the end of grouped layers' parameters).
    /// Loads go through C++ or `__ldg`, which the compiler knows may fault.
    #[test]
    fn no_kernel_loads_through_a_pure_asm() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/backend/cuda/kernels");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            seen += 1;
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap();
                let Some(at) = code.find("asm(") else { continue };
                let body = &code[at..];
                assert!(!(body.contains("\"ld.global") || body.contains("\"ld.param") || body.contains("\"ld.const")), "{}:{}: a load in a non-volatile asm: {line}", path.display(), i + 1);
            }
        }
        assert!(seen > 20, "kernel folder not found or empty: {dir}");
    }
}
