//! Convolution descriptor with MIOpen's rules (reference doc §1c, §2.5).

use crate::error::Result;
use crate::tensor::TensorDesc;
use crate::types::{ConvAttrib, ConvMode, FindMode, Layout};
use crate::{bail, ensure};

/// Geometry and attributes of a convolution. Mode is Convolution or Transpose (the deprecated
/// GroupConv / Depthwise values are mapped to Convolution on init, as MIOpen does).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvDesc {
    mode: ConvMode,
    pads: Vec<usize>,
    /// Padding after the last element of each spatial dimension: equal to `pads` for every
    /// descriptor the API makes (MIOpen pads symmetrically); solvers that split a problem into
    /// sub-convolutions (strided backward-data by phases) give theirs an asymmetric one.
    pads_end: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    out_pads: Vec<usize>,
    groups: usize,
    fp16_alt_impl: i32,
    deterministic: i32,
    fp8_rounding: i32,
    /// f32 convolutions on TF32 tensor cores: -1 = the process default
    /// (`CONFLUX_ALLOW_TF32=1` allows), 0 = strict f32, 1 = allowed. Strict means f32
    /// accuracy, which split TF32 products (`TcPrecision::Tf32x3`) also give.
    allow_tf32: i32,
    /// 1: the caller promises that the filter at a given address keeps its values from call
    /// to call, so solvers may keep a transformed copy of it (`weights_constant`).
    constant_weights: i32,
    find_mode: FindMode,
}

impl Default for ConvDesc {
    /// What `miopenCreateConvolutionDescriptor` gives: 2-D, pad 0, stride 1, dilation 1.
    fn default() -> Self {
        ConvDesc {
            mode: ConvMode::Convolution,
            pads: vec![0, 0],
            pads_end: vec![0, 0],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            out_pads: vec![0, 0],
            groups: 1,
            fp16_alt_impl: -1,
            deterministic: 0,
            fp8_rounding: 1,
            allow_tf32: -1,
            constant_weights: 0,
            find_mode: FindMode::DynamicHybrid,
        }
    }
}

impl ConvDesc {
    /// `miopenInitConvolutionDescriptor`: 2-D geometry.
    pub fn new_2d(mode: ConvMode, pad: [i64; 2], stride: [i64; 2], dilation: [i64; 2]) -> Result<ConvDesc> {
        Self::new(mode, &pad, &stride, &dilation)
    }

    /// `miopenInitConvolutionNdDescriptor`: N-d geometry (2 or 3 spatial dimensions).
    pub fn new(mode: ConvMode, pads: &[i64], strides: &[i64], dilations: &[i64]) -> Result<ConvDesc> {
        let mut d = ConvDesc::default();
        d.init(mode, pads, strides, dilations)?;
        Ok(d)
    }

    /// Re-initialize geometry in place. Like MIOpen, this resets the group count to 1 and the
    /// transpose output padding to 0; attributes are kept.
    pub fn init(&mut self, mode: ConvMode, pads: &[i64], strides: &[i64], dilations: &[i64]) -> Result<()> {
        let nd = pads.len();
        ensure!(
            (2..=3).contains(&nd),
            BadParm,
            "convolution: {nd} spatial dimensions; conflux supports 2 and 3"
        );
        ensure!(
            strides.len() == nd && dilations.len() == nd,
            BadParm,
            "convolution: {} pads, {} strides and {} dilations given; they must match",
            nd,
            strides.len(),
            dilations.len()
        );
        for i in 0..nd {
            ensure!(pads[i] >= 0, BadParm, "convolution: pad[{i}] = {} is negative", pads[i]);
            ensure!(strides[i] >= 1, BadParm, "convolution: stride[{i}] = {} must be >= 1", strides[i]);
            ensure!(dilations[i] >= 1, BadParm, "convolution: dilation[{i}] = {} must be >= 1", dilations[i]);
        }
        let to_usize = |v: &[i64]| -> Result<Vec<usize>> {
            v.iter()
                .map(|&x| usize::try_from(x).map_err(|_| crate::Error::bad_parm(format!("convolution: value {x} out of range"))))
                .collect()
        };
        self.mode = match mode {
            ConvMode::Transpose => ConvMode::Transpose,
            _ => ConvMode::Convolution,
        };
        self.pads = to_usize(pads)?;
        self.pads_end = self.pads.clone();
        self.strides = to_usize(strides)?;
        self.dilations = to_usize(dilations)?;
        self.out_pads = vec![0; nd];
        self.groups = 1;
        Ok(())
    }

    pub fn mode(&self) -> ConvMode { self.mode }
    pub fn spatial_dims(&self) -> usize { self.pads.len() }
    pub fn pads(&self) -> &[usize] { &self.pads }
    /// Padding after each spatial dimension (`pads` unless `set_pads_end` changed it).
    pub fn pads_end(&self) -> &[usize] { &self.pads_end }
    pub fn strides(&self) -> &[usize] { &self.strides }
    pub fn dilations(&self) -> &[usize] { &self.dilations }
    pub fn out_pads(&self) -> &[usize] { &self.out_pads }
    pub fn groups(&self) -> usize { self.groups }
    pub fn find_mode(&self) -> FindMode { self.find_mode }
    pub fn is_deterministic(&self) -> bool { self.deterministic == 1 }
    /// May f32 problems run on TF32 tensor cores (inputs rounded to 10 mantissa bits, f32
    /// accumulation)? cuDNN's math type, PyTorch's `allow_tf32`; off unless asked for.
    pub fn allows_tf32(&self) -> bool {
        match self.allow_tf32 {
            -1 => tf32_by_default(),
            v => v == 1,
        }
    }

    /// Has the caller promised constant weights (conflux attribute CONSTANT_WEIGHTS = 1)? Then
    /// a solver may transform the filter at an address once and reuse the result on later
    /// calls with the same address (what oneDNN users get by reordering weights once);
    /// changing the values behind that address is then the caller's error, and later results
    /// use the old values. Off by default: every call reads the filter.
    pub fn weights_constant(&self) -> bool { self.constant_weights == 1 }

    /// `miopenSetConvolutionGroupCount`. Like MIOpen, the count is validated at use; only
    /// values < 1 are refused here, since no use could accept them.
    pub fn set_groups(&mut self, groups: i64) -> Result<()> {
        ensure!(groups >= 1, BadParm, "convolution: group count {groups} must be >= 1");
        self.groups = groups as usize;
        Ok(())
    }

    /// `miopenSetTransposeConvNdOutputPadding`. Each value must be >= 0; `< stride` is
    /// checked when the output shape is computed, as in MIOpen.
    pub fn set_out_pads(&mut self, adj: &[i64]) -> Result<()> {
        ensure!(
            adj.len() == self.spatial_dims(),
            UnknownError,
            "convolution: {} output paddings given for a {}-D convolution",
            adj.len(),
            self.spatial_dims()
        );
        for (i, &a) in adj.iter().enumerate() {
            ensure!(a >= 0, BadParm, "convolution: output padding[{i}] = {a} is negative");
        }
        self.out_pads = adj.iter().map(|&a| a as usize).collect();
        Ok(())
    }

    /// Asymmetric padding for internal sub-convolutions (not reachable through the C API).
    pub(crate) fn set_pads_end(&mut self, pads_end: &[usize]) {
        assert_eq!(pads_end.len(), self.pads.len(), "one end padding per spatial dimension");
        self.pads_end = pads_end.to_vec();
    }

    /// The same convolution with other per-dimension geometry (groups and attributes kept):
    /// for internal problems that view a 3-D convolution as a 2-D one (`problem::fold_3d`).
    pub(crate) fn with_geometry(&self, pads: &[usize], pads_end: &[usize], strides: &[usize], dilations: &[usize]) -> ConvDesc {
        let nd = pads.len();
        assert!(pads_end.len() == nd && strides.len() == nd && dilations.len() == nd, "one value per spatial dimension");
        ConvDesc {
            pads: pads.to_vec(),
            pads_end: pads_end.to_vec(),
            strides: strides.to_vec(),
            dilations: dilations.to_vec(),
            out_pads: vec![0; nd],
            ..self.clone()
        }
    }

    pub fn set_find_mode(&mut self, mode: FindMode) { self.find_mode = mode; }

    /// `miopenSetConvolutionAttribute` with MIOpen's value ranges.
    pub fn set_attribute(&mut self, attr: ConvAttrib, value: i64) -> Result<()> {
        match attr {
            ConvAttrib::Fp16AltImpl => {
                ensure!((-1..=1).contains(&value), BadParm, "convolution attribute FP16_ALT_IMPL: value {value} not in -1..=1");
                self.fp16_alt_impl = value as i32;
            }
            ConvAttrib::Deterministic => {
                ensure!((0..=1).contains(&value), BadParm, "convolution attribute DETERMINISTIC: value {value} not in 0..=1");
                self.deterministic = value as i32;
            }
            ConvAttrib::AllowTf32 => {
                ensure!((-1..=1).contains(&value), BadParm, "convolution attribute ALLOW_TF32: value {value} not in -1..=1");
                self.allow_tf32 = value as i32;
            }
            ConvAttrib::ConstantWeights => {
                ensure!((0..=1).contains(&value), BadParm, "convolution attribute CONSTANT_WEIGHTS: value {value} not in 0..=1");
                self.constant_weights = value as i32;
            }
            ConvAttrib::Fp8RoundingMode => {
                ensure!((0..=1).contains(&value), BadParm, "convolution attribute FP8_ROUNDING_MODE: value {value} not in 0..=1");
                self.fp8_rounding = value as i32;
            }
        }
        Ok(())
    }

    pub fn attribute(&self, attr: ConvAttrib) -> i32 {
        match attr {
            ConvAttrib::Fp16AltImpl => self.fp16_alt_impl,
            ConvAttrib::Deterministic => self.deterministic,
            ConvAttrib::Fp8RoundingMode => self.fp8_rounding,
            ConvAttrib::AllowTf32 => self.allow_tf32,
            ConvAttrib::ConstantWeights => self.constant_weights,
        }
    }

    /// Effective filter extent `d·(k−1)+1` of spatial dimension `i`.
    pub fn extent(&self, i: usize, k: usize) -> usize {
        self.dilations[i] * (k - 1) + 1
    }

    /// Output lengths N,K,(D,)H,W of the forward operation (normal or transpose) for `x` and
    /// `w`, with MIOpen's validation. Spatial sizes use truncating division and are clamped
    /// to at least 1, exactly as MIOpen computes them.
    pub fn output_lens(&self, x: &TensorDesc, w: &TensorDesc) -> Result<Vec<usize>> {
        let nd = self.spatial_dims();
        ensure!(
            x.rank() == nd + 2 && w.rank() == nd + 2,
            BadParm,
            "convolution: {nd}-D convolution needs {}-dim input and filter, got x {}-dim and w {}-dim",
            nd + 2,
            x.rank(),
            w.rank()
        );
        // fp8 inputs may mix formats (e4m3 data with e5m2 filters); other types must match.
        let fp8 = |t: &TensorDesc| matches!(t.dtype(), crate::types::DataType::Float8 | crate::types::DataType::BFloat8);
        ensure!(
            x.dtype() == w.dtype() || (fp8(x) && fp8(w)),
            BadParm,
            "convolution: input type {:?} differs from filter type {:?}",
            x.dtype(),
            w.dtype()
        );
        let g = self.groups;
        let (xc, wk, wc) = (x.c(), w.n(), w.c());
        let out_c = match self.mode {
            ConvMode::Transpose => {
                ensure!(xc == wk, BadParm, "transpose convolution: input channels {xc} != filter K {wk}");
                ensure!(wk % g == 0, BadParm, "transpose convolution: filter K {wk} not divisible by group count {g}");
                wc.checked_mul(g).ok_or_else(|| crate::Error::bad_parm("transpose convolution: output channels overflow"))?
            }
            _ => {
                if g == 1 {
                    ensure!(xc == wc, BadParm, "convolution: input channels {xc} != filter channels {wc}");
                } else {
                    ensure!(xc % g == 0, BadParm, "convolution: Invalid group number: input channels {xc} not divisible by group count {g}");
                    ensure!(wk % g == 0, BadParm, "convolution: Invalid group number: filter K {wk} not divisible by group count {g}");
                    ensure!(xc / g == wc, BadParm, "convolution: Invalid filter channel number: input channels {xc} / groups {g} != filter channels {wc}");
                }
                wk
            }
        };
        let mut out = vec![x.n(), out_c];
        for i in 0..nd {
            let (inp, k) = (x.spatial()[i], w.spatial()[i]);
            let (p, pe, s) = (self.pads[i] as i128, self.pads_end[i] as i128, self.strides[i] as i128);
            let e = (self.dilations[i] as i128) * (k as i128 - 1) + 1;
            let o = match self.mode {
                ConvMode::Transpose => {
                    let a = self.out_pads[i];
                    ensure!(
                        a < self.strides[i],
                        BadParm,
                        "transpose convolution: output padding[{i}] = {a} must be < stride {}",
                        self.strides[i]
                    );
                    s * (inp as i128 - 1) + e - p - pe + a as i128
                }
                // C integer division truncates toward zero.
                _ => (inp as i128 + p + pe - e) / s + 1,
            };
            let o = o.max(1);
            ensure!(o <= usize::MAX as i128 / 2, BadParm, "convolution: output size overflows");
            out.push(o as usize);
        }
        Ok(out)
    }

    /// The forward output descriptor: same type as x (Float for Int8 x, as in MIOpen), packed,
    /// same layout family as x.
    pub fn output_desc(&self, x: &TensorDesc, w: &TensorDesc) -> Result<TensorDesc> {
        let lens = self.output_lens(x, w)?;
        let y = output_desc_like(x, &lens)?;
        if x.dtype() == crate::types::DataType::Int8 {
            return y.with_dtype(crate::types::DataType::Float);
        }
        Ok(y)
    }

    /// Short text of the geometry for keys and logs.
    pub fn key(&self) -> String {
        let j = |v: &[usize]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x");
        format!(
            "{}p{}{}s{}d{}a{}g{}{}{}{}",
            if self.mode == ConvMode::Transpose { "T" } else { "C" },
            j(&self.pads),
            if self.pads_end != self.pads { format!("e{}", j(&self.pads_end)) } else { String::new() },
            j(&self.strides),
            j(&self.dilations),
            j(&self.out_pads),
            self.groups,
            if self.is_deterministic() { "det" } else { "" },
            if self.allows_tf32() { "tf32" } else { "" },
            // Solvers keep transformed filters only under this promise: another invoker.
            if self.weights_constant() { "cw" } else { "" }
        )
    }
}

/// A packed descriptor with `lens`, in x's layout family (channels-last if x is).
pub fn output_desc_like(x: &TensorDesc, lens: &[usize]) -> Result<TensorDesc> {
    if x.is_channels_last() {
        let layout = if lens.len() == 5 { Layout::NDHWC } else { Layout::NHWC };
        if lens.len() == layout.rank() {
            return TensorDesc::with_layout(x.dtype(), layout, lens);
        }
    }
    if lens.len() > 5 {
        bail!(BadParm, "convolution: {}-dim tensors are not supported", lens.len());
    }
    TensorDesc::new(x.dtype(), lens)
}

/// `CONFLUX_ALLOW_TF32=1` in the environment: descriptors that leave ALLOW_TF32 at its
/// default (-1) allow TF32 (read once per process).
fn tf32_by_default() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("CONFLUX_ALLOW_TF32").is_ok_and(|v| v.trim() == "1"))
}
