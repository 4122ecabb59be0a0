//! Command logging (MIOpen's `MIOPEN_ENABLE_LOGGING_CMD`): with `CONFLUX_LOG=cmd` (a
//! comma-separated list containing `cmd`) or `MIOPEN_ENABLE_LOGGING_CMD=1`, each convolution
//! and fusion plan (`fusion/log_cmd.rs`) the library runs prints the `conflux-driver` command that reproduces it,
//! once per distinct problem, on stderr (and as a `tracing` info event), so a framework's call
//! can be replayed, verified and timed from the command line.

use crate::conv_desc::ConvDesc;
use crate::tensor::TensorDesc;
use crate::types::{ConvMode, DataType};
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// Read once: logging is a process-wide switch, as in MIOpen.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let cmd = topic_requested("cmd");
        let miopen = std::env::var("MIOPEN_ENABLE_LOGGING_CMD")
            .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "on" | "yes" | "true" | "enable" | "enabled"));
        cmd || miopen
    })
}

/// True when `CONFLUX_LOG` (a comma-separated list) names `topic`: `cmd` for driver commands,
/// `compile` for each kernel module compiled or loaded (`backend/cuda/module.rs`).
pub fn topic_requested(topic: &str) -> bool {
    std::env::var("CONFLUX_LOG").is_ok_and(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case(topic)))
}

/// Print `args` once per distinct command.
pub(crate) fn emit(func: &str, args: &str) {
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let fresh = SEEN.get_or_init(Default::default).lock().map(|mut s| s.insert(args.to_string())).unwrap_or(false);
    if fresh {
        tracing::info!(target: "conflux::cmd", func, command = args, "driver command");
        eprintln!("conflux: Command [{func}] conflux-driver {args}");
    }
}

/// Layout flag value when not the default (NCHW / NCDHW).
pub(crate) fn layout_of(d: &TensorDesc) -> Option<&'static str> {
    d.packed_layout().filter(|_| d.is_channels_last()).map(|l| l.name())
}

/// The geometry flags shared by `conv` and `CBAInfer` (2-D or 3-D; MIOpen's short names).
pub(crate) fn geometry_flags(conv: &ConvDesc, x: &TensorDesc, w: &TensorDesc, k: usize) -> String {
    let (sp, f) = (x.spatial(), w.spatial());
    let (p, s, d) = (conv.pads(), conv.strides(), conv.dilations());
    let i = sp.len() - 2; // index of H in the spatial lists
    let mut out = format!("-n {} -c {} -H {} -W {} -k {k} -y {} -x {} -p {} -q {} -u {} -v {} -l {} -j {} -g {}",
        x.n(), x.c(), sp[i], sp[i + 1], f[i], f[i + 1], p[i], p[i + 1], s[i], s[i + 1], d[i], d[i + 1], conv.groups());
    if sp.len() == 3 {
        out += &format!(" --spatial_dim 3 --in_d {} --fil_d {} --pad_d {} --conv_stride_d {} --dilation_d {}", sp[0], f[0], p[0], s[0], d[0]);
    }
    // conflux's math-mode extension: the descriptor explicitly allows TF32.
    if conv.attribute(crate::types::ConvAttrib::AllowTf32) == 1 {
        out += " --tf32";
    }
    if conv.weights_constant() {
        out += " --constant-weights";
    }
    out
}

/// The `conv…` command of a convolution as the user states it: x the forward input, w the
/// filter, y the forward output; `forw` is MIOpenDriver's `-F` (1 fwd, 2 bwd-data, 4 wrw).
pub fn conv_command(conv: &ConvDesc, x: &TensorDesc, w: &TensorDesc, y: &TensorDesc, forw: u8) -> String {
    let sub = match x.dtype() {
        DataType::Half => "convfp16",
        DataType::BFloat16 => "convbfp16",
        _ => "conv",
    };
    let trans = conv.mode() == ConvMode::Transpose;
    let k = if trans { w.c() * conv.groups() } else { w.n() };
    let mut cmd = format!("{sub} {} -m {} -F {forw} -t 1", geometry_flags(conv, x, w, k), if trans { "trans" } else { "conv" });
    if trans && conv.out_pads().iter().any(|&a| a > 0) {
        let a = conv.out_pads();
        let i = a.len() - 2;
        cmd += &format!(" -Y {} -X {}", a[i], a[i + 1]);
        if a.len() == 3 {
            cmd += &format!(" --trans_output_pad_d {}", a[0]);
        }
    }
    for (flag, d) in [("--in_layout", x), ("--fil_layout", w), ("--out_layout", y)] {
        if let Some(l) = layout_of(d) {
            cmd += &format!(" {flag} {l}");
        }
    }
    cmd
}

/// Log a convolution call (see `conv_command`).
pub(crate) fn conv(func: &str, conv: &ConvDesc, x: &TensorDesc, w: &TensorDesc, y: &TensorDesc, forw: u8) {
    if enabled() {
        emit(func, &conv_command(conv, x, w, y, forw));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_command_has_the_driver_flags() {
        let x = TensorDesc::new(DataType::Half, &[4, 64, 28, 28]).unwrap();
        let w = TensorDesc::new(DataType::Half, &[32, 64, 3, 3]).unwrap();
        let c = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[2, 2], &[1, 1]).unwrap();
        let y = c.output_desc(&x, &w).unwrap();
        assert_eq!(
            conv_command(&c, &x, &w, &y, 1),
            "convfp16 -n 4 -c 64 -H 28 -W 28 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 1 -j 1 -g 1 -m conv -F 1 -t 1"
        );
    }
}
