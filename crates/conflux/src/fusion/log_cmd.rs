//! Command logging of fusion plans: the `CBAInfer` command that reproduces a compiled plan
//! (see `crate::log_cmd`, which holds the switch and the convolution flags).

use super::{FusionOp, FusionOpKind};
use crate::log_cmd::{emit, enabled, geometry_flags, layout_of};
use crate::tensor::TensorDesc;
use crate::types::DataType;

/// The `CBAInfer` command of a plan, when the plan is one of MIOpen's seven modes
/// (C, [B], [N], [A] in that order) in fp32 or fp16; None otherwise.
pub fn plan_command(input: &TensorDesc, ops: &[FusionOp]) -> Option<String> {
    let sub = match input.dtype() {
        DataType::Float => "CBAInfer",
        DataType::Half => "CBAInferfp16",
        _ => return None,
    };
    let letters: String = ops
        .iter()
        .map(|o| match o.kind {
            FusionOpKind::ConvForward { .. } => 'c',
            FusionOpKind::BiasForward { .. } => 'b',
            FusionOpKind::BnInference { .. } => 'n',
            FusionOpKind::ActivationForward { .. } => 'a',
            _ => '?',
        })
        .collect();
    let mode = ["cbna", "cna", "na", "cn", "cba", "ca", "cb"].iter().position(|m| *m == letters)?;
    let mut cmd = format!("{sub} -F {mode}");
    match ops.first().map(|o| &o.kind) {
        Some(FusionOpKind::ConvForward { conv, w }) => cmd += &format!(" {}", geometry_flags(conv, input, w, w.n())),
        _ => {
            let sp = input.spatial();
            let i = sp.len() - 2;
            cmd += &format!(" -n {} -c {} -H {} -W {}", input.n(), input.c(), sp[i], sp[i + 1]);
            if sp.len() == 3 {
                cmd += &format!(" --spatial_dim 3 --in_d {}", sp[0]);
            }
        }
    }
    for o in ops {
        match &o.kind {
            FusionOpKind::BnInference { mode, .. } => cmd += &format!(" -M {}", *mode as i32),
            FusionOpKind::ActivationForward { mode } => cmd += &format!(" -m {}", *mode as i32),
            _ => {}
        }
    }
    if let Some(l) = layout_of(input) {
        cmd += &format!(" --layout {l}");
    }
    Some(cmd + " -t 1")
}

/// Log a fusion plan (its CBAInfer command, or a note that the driver has none).
pub(crate) fn plan(func: &str, input: &TensorDesc, ops: &[FusionOp], short_name: impl FnOnce() -> String) {
    if enabled() {
        match plan_command(input, ops) {
            Some(cmd) => emit(func, &cmd),
            None => emit(func, &format!("# no driver equivalent for fusion plan {} on {}", short_name(), input.key())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv_desc::ConvDesc;
    use crate::fusion::FusionPlan;
    use crate::types::{ActivationMode, ConvMode, FusionDirection, Layout};

    #[test]
    fn plan_command_names_the_fusion_mode() {
        let x = TensorDesc::with_layout(DataType::Float, Layout::NHWC, &[2, 8, 6, 6]).unwrap();
        let w = TensorDesc::with_layout(DataType::Float, Layout::NHWC, &[16, 8, 3, 3]).unwrap();
        let b = TensorDesc::new(DataType::Float, &[1, 16, 1, 1]).unwrap();
        let c = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
        let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
        plan.add_conv_forward(&c, &w).unwrap();
        plan.add_bias(&b).unwrap();
        plan.add_activation(ActivationMode::LeakyRelu).unwrap();
        let cmd = plan_command(&x, plan.ops()).unwrap();
        assert!(cmd.starts_with("CBAInfer -F 4 -n 2 -c 8 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1"), "{cmd}");
        assert!(cmd.contains(" -m 8") && cmd.contains("--layout NHWC"), "{cmd}");
        // Activation alone is no CBAInfer mode.
        let mut pw = FusionPlan::new(FusionDirection::Vertical, x.clone());
        pw.add_activation(ActivationMode::Relu).unwrap();
        assert!(plan_command(&x, pw.ops()).is_none());
    }
}
