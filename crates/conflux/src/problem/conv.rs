//! A convolution problem: direction plus the tensors of the *normal* (non-transposed)
//! convolution it computes. Transpose convolutions are mapped here, the way MIOpen maps them
//! (reference doc §1c, §2.5): transpose forward = backward-data of the normal convolution whose
//! output is the transpose input, transpose backward-data = normal forward, and transpose
//! backward-weights swaps x and dy.

use crate::conv_desc::ConvDesc;
use crate::error::Result;
use crate::tensor::TensorDesc;
use crate::types::{ConvMode, DataType, Direction, Layout};
use crate::{bail, ensure};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvProblem {
    pub direction: Direction,
    /// Input of the normal convolution (dx for backward-data).
    pub x: TensorDesc,
    /// Filter, K × C/G × (D ×) R × S.
    pub w: TensorDesc,
    /// Output of the normal convolution (dy for backward directions).
    pub y: TensorDesc,
    /// Geometry, always in Convolution mode.
    pub conv: ConvDesc,
}

impl ConvProblem {
    /// Forward problem as the user states it: `y = conv(x, w)` (transpose mode included).
    pub fn forward(conv: &ConvDesc, x: &TensorDesc, w: &TensorDesc, y: &TensorDesc) -> Result<ConvProblem> {
        check_output(conv, x, w, y, "convolution forward", "y")?;
        if conv.mode() == ConvMode::Transpose {
            Self::make("convolution forward", Direction::BackwardData, y, w, x, conv)
        } else {
            Self::make("convolution forward", Direction::Forward, x, w, y, conv)
        }
    }

    /// Backward-data as the user states it: `dx = conv_bwd_data(dy, w)`.
    pub fn backward_data(conv: &ConvDesc, dy: &TensorDesc, w: &TensorDesc, dx: &TensorDesc) -> Result<ConvProblem> {
        check_output(conv, dx, w, dy, "convolution backward-data", "dy")?;
        if conv.mode() == ConvMode::Transpose {
            Self::make("convolution backward-data", Direction::Forward, dy, w, dx, conv)
        } else {
            Self::make("convolution backward-data", Direction::BackwardData, dx, w, dy, conv)
        }
    }

    /// Backward-weights as the user states it: `dw = conv_bwd_weights(x, dy)`.
    pub fn backward_weights(conv: &ConvDesc, dy: &TensorDesc, x: &TensorDesc, dw: &TensorDesc) -> Result<ConvProblem> {
        check_output(conv, x, dw, dy, "convolution backward-weights", "dy")?;
        if conv.mode() == ConvMode::Transpose {
            Self::make("convolution backward-weights", Direction::BackwardWeights, dy, dw, x, conv)
        } else {
            Self::make("convolution backward-weights", Direction::BackwardWeights, x, dw, dy, conv)
        }
    }

    fn make(op: &str, direction: Direction, x: &TensorDesc, w: &TensorDesc, y: &TensorDesc, conv: &ConvDesc) -> Result<ConvProblem> {
        // int8 / fp8 (forward only, with their own output types): `quant.rs` has the rules.
        let quantized = crate::quant::conv_types(op, direction, x, w, y)?.is_some();
        for (name, t) in [("x", x), ("w", w), ("y", y)].into_iter().filter(|_| !quantized) {
            ensure!(
                matches!(t.dtype(), DataType::Float | DataType::Half | DataType::BFloat16),
                NotImplemented,
                "{op}: tensor {name} has type {:?}; conflux computes Float, Half and BFloat16",
                t.dtype()
            );
        }
        ensure!(
            quantized || (x.dtype() == w.dtype() && x.dtype() == y.dtype()),
            BadParm,
            "{op}: tensor types differ (x {:?}, w {:?}, y {:?})",
            x.dtype(),
            w.dtype(),
            y.dtype()
        );
        ensure!(x.n() == y.n(), BadParm, "{op}: batch sizes differ (x {}, y {})", x.n(), y.n());
        let mut normal = conv.clone();
        normal.set_mode_normal();
        Ok(ConvProblem { direction, x: x.clone(), w: w.clone(), y: y.clone(), conv: normal })
    }

    pub fn dtype(&self) -> DataType { self.x.dtype() }
    /// The int8 / fp8 kind of a quantized forward convolution (None for Float, Half, BFloat16).
    pub fn quant(&self) -> Option<crate::quant::Quant> {
        crate::quant::conv_types("convolution", self.direction, &self.x, &self.w, &self.y).ok().flatten()
    }
    pub fn groups(&self) -> usize { self.conv.groups() }
    pub fn spatial_dims(&self) -> usize { self.conv.spatial_dims() }
    /// K (output channels of the normal convolution).
    pub fn k(&self) -> usize { self.w.n() }
    /// C (input channels of the normal convolution).
    pub fn c(&self) -> usize { self.x.c() }
    /// Filter spatial lengths.
    pub fn filter(&self) -> &[usize] { self.w.spatial() }

    /// Multiply-accumulates of the normal convolution (same in every direction).
    pub fn macs(&self) -> f64 {
        let out: f64 = self.y.lens().iter().map(|&v| v as f64).product();
        let per: f64 = (self.w.c() as f64) * self.filter().iter().map(|&v| v as f64).product::<f64>();
        out * per
    }

    /// Text key identifying the problem (used by caches and the find-db).
    pub fn key(&self) -> String {
        format!("{}|x {}|w {}|y {}|{}", self.direction.letter(), self.x.key(), self.w.key(), self.y.key(), self.conv.key())
    }
}

impl ConvProblem {
    /// A stride-1 backward-data problem as the forward convolution that computes it:
    /// dx = conv(dy, w') where w' swaps each group's input and output channels and reverses
    /// the taps (w'[g·CG + c][k][t] = w[g·KG + k][c][T − 1 − t]) and the padding becomes
    /// dilation·(taps − 1) − pad. w' has lengths [C, K/G, taps…] in `w_layout`; the
    /// descriptor keeps the caller's attributes. Err says why the problem has no such form.
    pub fn backward_data_as_forward(&self, w_layout: Layout) -> std::result::Result<ConvProblem, String> {
        if self.direction != Direction::BackwardData {
            return Err(format!("backward-data only (this is {:?})", self.direction));
        }
        let d = &self.conv;
        if d.strides().iter().any(|&s| s != 1) {
            return Err(format!("stride {:?}: only stride 1 is a forward convolution of dy", d.strides()));
        }
        let taps = self.filter();
        let (mut pads, mut pads_end) = (Vec::with_capacity(taps.len()), Vec::with_capacity(taps.len()));
        for (i, (&t, &dil)) in taps.iter().zip(d.dilations()).enumerate() {
            let reach = dil * (t - 1);
            let (p, pe) = (d.pads()[i], d.pads_end()[i]);
            if p.max(pe) > reach {
                return Err(format!("padding {} exceeds the filter's reach {reach}: dx would need negative padding", p.max(pe)));
            }
            pads.push((reach - p) as i64);
            pads_end.push(reach - pe);
        }
        let err = |e: crate::error::Error| e.reason;
        let groups = self.groups();
        let ones = vec![1i64; taps.len()];
        let dils: Vec<i64> = d.dilations().iter().map(|&v| v as i64).collect();
        let mut fwd = ConvDesc::new(ConvMode::Convolution, &pads, &ones, &dils).map_err(err)?;
        fwd.set_groups(groups as i64).map_err(err)?;
        fwd.set_pads_end(&pads_end);
        fwd.copy_attributes(d);
        let w_lens: Vec<usize> = [self.x.c(), self.k() / groups].into_iter().chain(taps.iter().copied()).collect();
        let w2 = TensorDesc::with_layout(self.dtype(), w_layout, &w_lens).map_err(err)?;
        ConvProblem::forward(&fwd, &self.y, &w2, &self.x).map_err(err)
    }
}

impl ConvDesc {
    pub(crate) fn set_mode_normal(&mut self) {
        // The geometry stays; only the mode changes. Output padding has no meaning for the
        // normal convolution, so it is cleared.
        let (p, s, d, g): (Vec<i64>, Vec<i64>, Vec<i64>, usize) = (
            self.pads().iter().map(|&v| v as i64).collect(),
            self.strides().iter().map(|&v| v as i64).collect(),
            self.dilations().iter().map(|&v| v as i64).collect(),
            self.groups(),
        );
        let keep = self.clone();
        self.init(ConvMode::Convolution, &p, &s, &d).expect("valid geometry stays valid");
        self.set_groups(g as i64).expect("valid group count");
        self.set_pads_end(keep.pads_end());
        self.copy_attributes(&keep);
        self.set_find_mode(keep.find_mode());
    }

    /// Every attribute of `other` (math mode, determinism, TF32 permission, ...): a
    /// convolution rewritten into another one keeps the caller's numerical choices.
    pub(crate) fn copy_attributes(&mut self, other: &ConvDesc) {
        for a in crate::types::ConvAttrib::ALL.iter().copied() {
            self.set_attribute(a, other.attribute(a) as i64).expect("valid attribute");
        }
    }
}

/// `y` must have exactly the lengths the forward operation of `conv` produces from x and w.
fn check_output(conv: &ConvDesc, x: &TensorDesc, w: &TensorDesc, y: &TensorDesc, op: &str, yname: &str) -> Result<()> {
    ensure!(x.rank() >= 3, BadParm, "{op}: input has {} dims; at least 3 needed", x.rank());
    let want = conv.output_lens(x, w).map_err(|e| e.context(op))?;
    if y.lens() != want.as_slice() {
        bail!(BadParm, "{op}: {yname} lengths {:?} do not match the convolution output {:?}", y.lens(), want);
    }
    Ok(())
}
