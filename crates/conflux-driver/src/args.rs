//! Command-line flags: MIOpenDriver's long and short names and defaults (reference doc §4),
//! one struct per subcommand family so each keeps MIOpen's own defaults, plus the conflux
//! extras shared by all (`Common`).

use clap::{Args, Parser, Subcommand};
use conflux::{DataType, Layout};

#[derive(Parser, Debug)]
#[command(
    name = "conflux-driver",
    about = "MIOpenDriver-compatible driver for conflux: run, verify, time and tune convolutions and fusion plans",
    disable_version_flag = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Convolution, fp32.
    #[command(name = "conv", allow_negative_numbers = true)]
    Conv(ConvArgs),
    /// Convolution, fp16.
    #[command(name = "convfp16", allow_negative_numbers = true)]
    ConvFp16(ConvArgs),
    /// Convolution, bf16.
    #[command(name = "convbfp16", allow_negative_numbers = true)]
    ConvBfp16(ConvArgs),
    /// Convolution, int8 x and w, f32 y (forward only: MIOpen defines no int8 backward).
    #[command(name = "convint8", allow_negative_numbers = true)]
    ConvInt8(ConvArgs),
    /// Fused conv + bias + batch-norm + activation inference, fp32.
    #[command(name = "CBAInfer", allow_negative_numbers = true)]
    CbaInfer(CbaArgs),
    /// Fused conv + bias + batch-norm + activation inference, fp16.
    #[command(name = "CBAInferfp16", allow_negative_numbers = true)]
    CbaInferFp16(CbaArgs),
    /// Batch normalization, fp32.
    #[command(name = "bnorm", allow_negative_numbers = true)]
    Bnorm(BnormArgs),
    /// Batch normalization, fp16 data (statistics and parameters are fp32, as MIOpen derives them).
    #[command(name = "bnormfp16", allow_negative_numbers = true)]
    BnormFp16(BnormArgs),
    /// Activation, fp32.
    #[command(name = "activ", allow_negative_numbers = true)]
    Activ(ActivArgs),
    /// Activation, fp16.
    #[command(name = "activfp16", allow_negative_numbers = true)]
    ActivFp16(ActivArgs),
    /// Run a problem list (C-H-W-K-fy-fx-py-px per line) as fused and unfused conv+bias+activation; print a table.
    #[command(name = "bench")]
    Bench(BenchArgs),
}

/// conflux extras accepted by every subcommand.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Device: cpu, cuda or cuda:N (default: CONFLUX_DEVICE, else GPU 0 when usable, else CPU).
    #[arg(long)]
    pub device: Option<String>,
    /// Print one JSON document on stdout (the text lines go to stderr).
    #[arg(long)]
    pub json: bool,
    /// List every solver for the problem with its verdict (applicable / why not), then exit.
    #[arg(long = "list-solvers")]
    pub list_solvers: bool,
    /// Override the verification tolerance (testing aid).
    #[arg(long, hide = true, allow_negative_numbers = true)]
    pub tolerance: Option<f64>,
    /// conflux: let f32 convolutions run on TF32 tensor cores (inputs rounded to 10 mantissa
    /// bits; verified with the TF32 tolerance). Without it f32 is strict unless
    /// CONFLUX_ALLOW_TF32=1.
    #[arg(long)]
    pub tf32: bool,
    /// conflux: convolution descriptors promise constant weights (attribute CONSTANT_WEIGHTS):
    /// CPU solvers transform the filter once and reuse it on later runs, as oneDNN's reordered
    /// weights are (times then exclude the filter transform).
    #[arg(long = "constant-weights")]
    pub constant_weights: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ConvArgs {
    /// 0 fwd+bwd+wrw, 1 fwd, 2 bwd-data, 4 wrw, 3 fwd+bwd, 5 fwd+wrw, 6 bwd+wrw.
    #[arg(short = 'F', long = "forw", default_value_t = 0)]
    pub forw: i64,
    #[arg(short = 'n', long = "batchsize", default_value_t = 100)]
    pub n: i64,
    #[arg(short = 'c', long = "in_channels", default_value_t = 3)]
    pub c: i64,
    #[arg(short = '!', long = "in_d", default_value_t = 32)]
    pub in_d: i64,
    #[arg(short = 'H', long = "in_h", default_value_t = 32)]
    pub h: i64,
    #[arg(short = 'W', long = "in_w", default_value_t = 32)]
    pub w: i64,
    #[arg(short = 'k', long = "out_channels", default_value_t = 32)]
    pub k: i64,
    #[arg(short = '@', long = "fil_d", default_value_t = 3)]
    pub fil_d: i64,
    #[arg(short = 'y', long = "fil_h", default_value_t = 3)]
    pub fil_h: i64,
    #[arg(short = 'x', long = "fil_w", default_value_t = 3)]
    pub fil_w: i64,
    #[arg(short = '#', long = "conv_stride_d", default_value_t = 1)]
    pub stride_d: i64,
    #[arg(short = 'u', long = "conv_stride_h", default_value_t = 1)]
    pub stride_h: i64,
    #[arg(short = 'v', long = "conv_stride_w", default_value_t = 1)]
    pub stride_w: i64,
    #[arg(short = '$', long = "pad_d", default_value_t = 0)]
    pub pad_d: i64,
    #[arg(short = 'p', long = "pad_h", default_value_t = 0)]
    pub pad_h: i64,
    #[arg(short = 'q', long = "pad_w", default_value_t = 0)]
    pub pad_w: i64,
    /// Padding value (unused, as in MIOpen).
    #[arg(short = 'r', long = "pad_val", default_value_t = 0)]
    pub pad_val: i64,
    #[arg(short = '%', long = "trans_output_pad_d", default_value_t = 0)]
    pub out_pad_d: i64,
    #[arg(short = 'Y', long = "trans_output_pad_h", default_value_t = 0)]
    pub out_pad_h: i64,
    #[arg(short = 'X', long = "trans_output_pad_w", default_value_t = 0)]
    pub out_pad_w: i64,
    #[arg(short = '^', long = "dilation_d", default_value_t = 1)]
    pub dil_d: i64,
    #[arg(short = 'l', long = "dilation_h", default_value_t = 1)]
    pub dil_h: i64,
    #[arg(short = 'j', long = "dilation_w", default_value_t = 1)]
    pub dil_w: i64,
    /// 2 or 3 spatial dimensions.
    #[arg(short = '_', long = "spatial_dim", default_value_t = 2)]
    pub spatial_dim: i64,
    #[arg(short = 'g', long = "group_count", default_value_t = 1)]
    pub groups: i64,
    /// conv or trans.
    #[arg(short = 'm', long = "mode", default_value = "conv")]
    pub mode: String,
    /// same, valid or default.
    #[arg(short = 'z', long = "pad_mode", default_value = "default")]
    pub pad_mode: String,
    #[arg(short = 'I', long = "in_layout", default_value = "")]
    pub in_layout: String,
    #[arg(short = 'O', long = "out_layout", default_value = "")]
    pub out_layout: String,
    #[arg(short = 'f', long = "fil_layout", default_value = "")]
    pub fil_layout: String,
    /// conflux: one layout for input, output and filter (NCHW, NHWC, NCDHW, NDHWC).
    #[arg(long = "layout")]
    pub layout: Option<String>,
    #[arg(short = 'i', long = "iter", default_value_t = 10)]
    pub iter: i64,
    #[arg(short = 'V', long = "verify", default_value_t = 1)]
    pub verify: i64,
    /// Directory to cache reference outputs (accepted, not used).
    #[arg(short = 'C', long = "verification_cache", default_value = "")]
    pub verification_cache: String,
    #[arg(short = 't', long = "time", default_value_t = 0)]
    pub time: i64,
    /// 1 wall-clock time, 2 with warm-up (needs -t 1).
    #[arg(short = 'w', long = "wall", default_value_t = 0)]
    pub wall: i64,
    /// Exhaustive search in Find (prints every timed candidate). Find's progress goes to
    /// stderr: a bar on a terminal, else one `Find: step i/n` line per timed candidate.
    #[arg(short = 's', long = "search", default_value_t = 0)]
    pub search: i64,
    /// < 0 Find API, 0 immediate mode best, > 0 solution id (or a solver name).
    #[arg(short = 'S', long = "solution", default_value = "-1")]
    pub solution: String,
    /// 1: add a bias (forward bias / backward bias).
    #[arg(short = 'b', long = "bias", default_value = "")]
    pub bias: String,
    #[arg(short = 'P', long = "printconv", default_value_t = 1)]
    pub printconv: i64,
    /// Dump buffers (accepted, not implemented).
    #[arg(short = 'o', long = "dump_output", default_value_t = 0)]
    pub dump_output: i64,
    #[arg(short = 'd', long = "in_data", default_value = "")]
    pub in_data: String,
    #[arg(short = 'e', long = "weights", default_value = "")]
    pub weights: String,
    #[arg(short = 'D', long = "dout_data", default_value = "")]
    pub dout_data: String,
    #[arg(short = 'a', long = "in_bias", default_value = "")]
    pub in_bias: String,
    #[arg(short = 'Z', long = "tensor_vect", default_value_t = 0)]
    pub tensor_vect: i64,
    #[arg(short = 'L', long = "vector_length", default_value_t = 1)]
    pub vector_length: i64,
    #[arg(short = 'G', long = "gpualloc", default_value_t = 0)]
    pub gpualloc: i64,
    #[arg(short = 'U', long = "in_cast_type", default_value = "-1")]
    pub in_cast_type: String,
    #[arg(short = 'T', long = "out_cast_type", default_value = "-1")]
    pub out_cast_type: String,
    #[arg(short = 'R', long = "wei_cast_type", default_value = "-1")]
    pub wei_cast_type: String,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct CbaArgs {
    /// 0 cbna, 1 cna, 2 na, 3 cn, 4 cba, 5 ca, 6 cb.
    #[arg(short = 'F', long = "fusion_mode", default_value_t = 0)]
    pub fusion_mode: i64,
    #[arg(short = 'n', long = "batchsize", default_value_t = 32)]
    pub n: i64,
    #[arg(short = 'c', long = "in_channels", default_value_t = 3)]
    pub c: i64,
    #[arg(short = 'H', long = "in_h", default_value_t = 32)]
    pub h: i64,
    #[arg(short = 'W', long = "in_w", default_value_t = 32)]
    pub w: i64,
    #[arg(short = 'k', long = "out_channels", default_value_t = 32)]
    pub k: i64,
    #[arg(short = 'g', long = "group_count", default_value_t = 1)]
    pub groups: i64,
    #[arg(short = 'y', long = "fil_h", default_value_t = 3)]
    pub fil_h: i64,
    #[arg(short = 'x', long = "fil_w", default_value_t = 3)]
    pub fil_w: i64,
    #[arg(short = 'u', long = "conv_stride_h", default_value_t = 1)]
    pub stride_h: i64,
    #[arg(short = 'v', long = "conv_stride_w", default_value_t = 1)]
    pub stride_w: i64,
    #[arg(short = 'p', long = "pad_h", default_value_t = 0)]
    pub pad_h: i64,
    #[arg(short = 'q', long = "pad_w", default_value_t = 0)]
    pub pad_w: i64,
    #[arg(short = 'r', long = "pad_val", default_value_t = 0)]
    pub pad_val: i64,
    #[arg(short = 'l', long = "dilation_h", default_value_t = 1)]
    pub dil_h: i64,
    #[arg(short = 'j', long = "dilation_w", default_value_t = 1)]
    pub dil_w: i64,
    /// same / valid recompute the pads; anything else keeps them.
    #[arg(short = 'z', long = "pad_mode", default_value = "conv")]
    pub pad_mode: String,
    /// Activation mode number (0 passthru … 9 elu; conflux: 100 silu, 101 hardswish, 102 hardsigmoid, 103 gelu, 104 gelu-tanh, 105 mish); 3 = relu.
    #[arg(short = 'm', long = "activMode", default_value_t = 3)]
    pub activ_mode: i64,
    #[arg(short = 'A', long = "alpha", default_value_t = 1.0)]
    pub alpha: f64,
    #[arg(short = 'B', long = "beta", default_value_t = 0.0)]
    pub beta: f64,
    #[arg(short = 'G', long = "gamma", default_value_t = 1.0)]
    pub gamma: f64,
    /// 0 per-activation, 1 spatial.
    #[arg(short = 'M', long = "bnMode", default_value_t = 0)]
    pub bn_mode: i64,
    #[arg(short = 'i', long = "iter", default_value_t = 1)]
    pub iter: i64,
    #[arg(short = 'V', long = "verify", default_value_t = 1)]
    pub verify: i64,
    #[arg(short = 't', long = "time", default_value_t = 0)]
    pub time: i64,
    #[arg(short = 'w', long = "wall", default_value_t = 0)]
    pub wall: i64,
    /// Unused, as in MIOpen.
    #[arg(short = 'D', long = "dot_graph", default_value = "")]
    pub dot_graph: String,
    /// conflux: 3 for a 3-D plan (with the depth flags below).
    #[arg(short = '_', long = "spatial_dim", default_value_t = 2)]
    pub spatial_dim: i64,
    #[arg(short = '!', long = "in_d", default_value_t = 8)]
    pub in_d: i64,
    #[arg(short = '@', long = "fil_d", default_value_t = 3)]
    pub fil_d: i64,
    #[arg(short = '#', long = "conv_stride_d", default_value_t = 1)]
    pub stride_d: i64,
    #[arg(short = '$', long = "pad_d", default_value_t = 0)]
    pub pad_d: i64,
    #[arg(short = '^', long = "dilation_d", default_value_t = 1)]
    pub dil_d: i64,
    /// conflux: data layout NCHW or NHWC (NCDHW / NDHWC for 3-D).
    #[arg(long = "layout")]
    pub layout: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct BnormArgs {
    /// 1 forward training, 2 forward inference, 0 off (with -b 0 it becomes 1).
    #[arg(short = 'F', long = "forw", default_value_t = 0)]
    pub forw: i64,
    /// 1 backward (ignored with a warning when forw ≠ 0).
    #[arg(short = 'b', long = "back", default_value_t = 0)]
    pub back: i64,
    #[arg(short = 'n', long = "batchsize", default_value_t = 32)]
    pub n: i64,
    #[arg(short = 'c', long = "in_channels", default_value_t = 3)]
    pub c: i64,
    #[arg(short = 'H', long = "in_h", default_value_t = 32)]
    pub h: i64,
    #[arg(short = 'W', long = "in_w", default_value_t = 32)]
    pub w: i64,
    /// D > 0 gives a 5-D tensor.
    #[arg(short = 'D', long = "in_d", default_value_t = 0)]
    pub d: i64,
    #[arg(short = 'L', long = "layout", default_value = "")]
    pub layout: String,
    /// 0 per-activation, 1 spatial.
    #[arg(short = 'm', long = "mode", default_value_t = 0)]
    pub mode: i64,
    /// Training: write saved mean / inverse variance; backward: use them.
    #[arg(short = 's', long = "save", default_value_t = 0)]
    pub save: i64,
    /// Training: update running statistics; inference: use the estimates (else batch statistics).
    #[arg(short = 'r', long = "run", default_value_t = 0)]
    pub run: i64,
    /// Parsed but ignored (the driver passes 1), as in MIOpen.
    #[arg(short = 'A', long = "alpha", default_value_t = 1.0)]
    pub alpha: f64,
    /// Parsed but ignored (the driver passes 0), as in MIOpen.
    #[arg(short = 'B', long = "beta", default_value_t = 0.0)]
    pub beta: f64,
    #[arg(short = 'i', long = "iter", default_value_t = 1)]
    pub iter: i64,
    #[arg(short = 'V', long = "verify", default_value_t = 1)]
    pub verify: i64,
    #[arg(short = 't', long = "time", default_value_t = 0)]
    pub time: i64,
    #[arg(short = 'w', long = "wall", default_value_t = 0)]
    pub wall: i64,
    #[arg(short = 'P', long = "printconv", default_value_t = 1)]
    pub printconv: i64,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct ActivArgs {
    /// 0 fwd+bwd, 1 fwd, 2 bwd.
    #[arg(short = 'F', long = "forw", default_value_t = 0)]
    pub forw: i64,
    #[arg(short = 'n', long = "batchsize", default_value_t = 100)]
    pub n: i64,
    #[arg(short = 'c', long = "in_channels", default_value_t = 3)]
    pub c: i64,
    #[arg(short = 'H', long = "in_h", default_value_t = 32)]
    pub h: i64,
    #[arg(short = 'W', long = "in_w", default_value_t = 32)]
    pub w: i64,
    /// Activation mode number (0 passthru … 9 elu; conflux: 100 silu, 101 hardswish, 102 hardsigmoid, 103 gelu, 104 gelu-tanh, 105 mish); 3 = relu.
    #[arg(short = 'm', long = "mode", default_value_t = 3)]
    pub mode: i64,
    #[arg(short = 'A', long = "alpha", default_value_t = 1.0)]
    pub alpha: f64,
    #[arg(short = 'B', long = "beta", default_value_t = 1.0)]
    pub beta: f64,
    #[arg(short = 'G', long = "gamma", default_value_t = 1.0)]
    pub gamma: f64,
    #[arg(short = 'i', long = "iter", default_value_t = 10)]
    pub iter: i64,
    #[arg(short = 'V', long = "verify", default_value_t = 1)]
    pub verify: i64,
    #[arg(short = 't', long = "time", default_value_t = 0)]
    pub time: i64,
    #[arg(short = 'w', long = "wall", default_value_t = 0)]
    pub wall: i64,
    /// conflux: data layout NCHW or NHWC.
    #[arg(long = "layout")]
    pub layout: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Problem list: one C-H-W-K-fy-fx-py-px per line, '#' comments (stride 1, dilation 1, groups 1).
    pub list: std::path::PathBuf,
    /// Batch size (default: 64 on a GPU, 1 on the CPU).
    #[arg(short = 'n', long = "batchsize")]
    pub n: Option<i64>,
    /// fp32, fp16 or bf16.
    #[arg(long = "dtype", default_value = "fp32")]
    pub dtype: String,
    #[arg(long = "layout", default_value = "NCHW")]
    pub layout: String,
    /// Activation mode number of the fused plan (3 = relu; 0..9 and conflux's 100..105).
    #[arg(short = 'm', long = "activMode", default_value_t = 3)]
    pub activ_mode: i64,
    /// Timed iterations per problem and path.
    #[arg(short = 'i', long = "iter", default_value_t = 5)]
    pub iter: i64,
    /// Verify each fused result against the f64 reference (slow on big problems).
    #[arg(short = 'V', long = "verify", default_value_t = 0)]
    pub verify: i64,
    /// Write a bar chart of the fused-vs-unfused speedups: FILE.svg, or FILE.png when built
    /// with `--features png` (embedded font; no system packages).
    #[arg(long = "plot")]
    pub plot: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// `DataType` of a data-type word (fp32 / fp16 / bf16).
pub fn parse_dtype(s: &str) -> Result<DataType, String> {
    match s.to_ascii_lowercase().as_str() {
        "fp32" | "f32" | "float" => Ok(DataType::Float),
        "fp16" | "f16" | "half" => Ok(DataType::Half),
        "bf16" | "bfp16" => Ok(DataType::BFloat16),
        o => Err(format!("unknown data type '{o}' (expected fp32, fp16 or bf16)")),
    }
}

/// Layout from MIOpen's layout strings (upper-cased, as MIOpenDriver does); "" gives the
/// default for the rank.
pub fn parse_layout(s: &str, rank: usize) -> Result<Layout, String> {
    let l = match s.to_ascii_uppercase().as_str() {
        "" if rank == 5 => Layout::NCDHW,
        "" => Layout::NCHW,
        "NCHW" if rank == 5 => Layout::NCDHW,
        "NHWC" if rank == 5 => Layout::NDHWC,
        "NCHW" => Layout::NCHW,
        "NHWC" => Layout::NHWC,
        "NCDHW" => Layout::NCDHW,
        "NDHWC" => Layout::NDHWC,
        o => return Err(format!("unsupported layout '{o}' (NCHW, NHWC, NCDHW or NDHWC)")),
    };
    if l.rank() != rank {
        return Err(format!("layout {} is for {}-D tensors, the problem has {rank} dims", l.name(), l.rank()));
    }
    Ok(l)
}

/// A flag that must be positive (sizes, strides, dilations, groups).
pub fn positive(name: &str, v: i64) -> Result<usize, String> {
    if v < 1 {
        return Err(format!("{name} must be > 0, got {v}"));
    }
    Ok(v as usize)
}

/// A flag that must be ≥ 0 (pads).
pub fn non_negative(name: &str, v: i64) -> Result<usize, String> {
    if v < 0 {
        return Err(format!("{name} must be >= 0, got {v}"));
    }
    Ok(v as usize)
}
