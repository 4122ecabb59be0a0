//! Enumerations of the MIOpen API, with MIOpen's numeric values.
//! Conversions from `i32` return `None` for values MIOpen does not define.

/// Declares a `#[repr(i32)]` enum with explicit values, plus `from_i32` and `ALL`.
macro_rules! miopen_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $val:expr),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i32)]
        pub enum $name { $($(#[$vm])* $var = $val),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$var),+];
            pub fn from_i32(v: i32) -> Option<$name> {
                match v { $($val => Some($name::$var),)+ _ => None }
            }
        }
        impl TryFrom<i32> for $name {
            type Error = crate::Error;
            fn try_from(v: i32) -> crate::Result<$name> {
                $name::from_i32(v).ok_or_else(|| crate::Error::bad_parm(
                    format!("{} value {} is not defined", stringify!($name), v)))
            }
        }
    };
}

miopen_enum! {
    /// `miopenDataType_t`.
    DataType {
        Half = 0, Float = 1, Int32 = 2, Int8 = 3, BFloat16 = 5, Double = 6,
        Float8 = 7, BFloat8 = 8, Int64 = 9,
    }
}

impl DataType {
    pub fn size(self) -> usize {
        match self {
            DataType::Half | DataType::BFloat16 => 2,
            DataType::Float | DataType::Int32 => 4,
            DataType::Int8 | DataType::Float8 | DataType::BFloat8 => 1,
            DataType::Double | DataType::Int64 => 8,
        }
    }
    /// Short name used in problem keys and printed tables.
    pub fn short(self) -> &'static str {
        match self {
            DataType::Half => "FP16",
            DataType::Float => "FP32",
            DataType::Int32 => "INT32",
            DataType::Int8 => "INT8",
            DataType::BFloat16 => "BF16",
            DataType::Double => "FP64",
            DataType::Float8 => "FP8",
            DataType::BFloat8 => "BFP8",
            DataType::Int64 => "INT64",
        }
    }
    /// The floating-point types conflux computes with (f32 accumulation for the 16-bit ones).
    pub fn is_compute_type(self) -> bool {
        matches!(self, DataType::Half | DataType::Float | DataType::BFloat16)
    }
}

miopen_enum! {
    /// `miopenTensorLayout_t`. 0–6 are 4-D layouts, 7–8 are 5-D.
    Layout {
        NCHW = 0, NHWC = 1, CHWN = 2, NCHWc4 = 3, NCHWc8 = 4, CHWNc4 = 5, CHWNc8 = 6,
        NCDHW = 7, NDHWC = 8,
    }
}

impl Layout {
    /// Number of dimensions the layout describes.
    pub fn rank(self) -> usize {
        match self {
            Layout::NCDHW | Layout::NDHWC => 5,
            _ => 4,
        }
    }
    /// Channels-last layouts (C innermost).
    pub fn is_channels_last(self) -> bool {
        matches!(self, Layout::NHWC | Layout::NDHWC)
    }
    pub fn name(self) -> &'static str {
        match self {
            Layout::NCHW => "NCHW",
            Layout::NHWC => "NHWC",
            Layout::CHWN => "CHWN",
            Layout::NCHWc4 => "NCHWc4",
            Layout::NCHWc8 => "NCHWc8",
            Layout::CHWNc4 => "CHWNc4",
            Layout::CHWNc8 => "CHWNc8",
            Layout::NCDHW => "NCDHW",
            Layout::NDHWC => "NDHWC",
        }
    }
}

miopen_enum! {
    /// `miopenConvolutionMode_t`. GroupConv and Depthwise are deprecated aliases of Convolution.
    ConvMode { Convolution = 0, Transpose = 1, GroupConv = 2, Depthwise = 3 }
}

miopen_enum! {
    /// `miopenConvAlgorithm_t` (shared numerically by the fwd / bwd-data / bwd-weights enums).
    /// 4 is the deprecated `miopenTransposeBwdDataAlgoGEMM`, which only the bwd-data enum has.
    ConvAlgorithm { Gemm = 0, Direct = 1, Fft = 2, Winograd = 3, ImplicitGemm = 5 }
}

impl ConvAlgorithm {
    pub fn name(self) -> &'static str {
        match self {
            ConvAlgorithm::Gemm => "miopenConvolutionAlgoGEMM",
            ConvAlgorithm::Direct => "miopenConvolutionAlgoDirect",
            ConvAlgorithm::Fft => "miopenConvolutionAlgoFFT",
            ConvAlgorithm::Winograd => "miopenConvolutionAlgoWinograd",
            ConvAlgorithm::ImplicitGemm => "miopenConvolutionAlgoImplicitGEMM",
        }
    }
}

miopen_enum! {
    /// `miopenActivationMode_t`, plus conflux's activations of modern networks (100–105, not
    /// in MIOpen; no parameters): SiLU x·σ(x), hard-swish x·min(max(x+3, 0), 6)/6,
    /// hard-sigmoid min(max(x+3, 0), 6)/6, GELU 0.5·x·(1+erf(x/√2)), GELU-tanh
    /// 0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³))) and Mish x·tanh(softplus(x)).
    ActivationMode {
        PassThru = 0, Logistic = 1, Tanh = 2, Relu = 3, SoftRelu = 4, Abs = 5, Power = 6,
        ClippedRelu = 7, LeakyRelu = 8, Elu = 9,
        Silu = 100, HardSwish = 101, HardSigmoid = 102, Gelu = 103, GeluTanh = 104, Mish = 105,
    }
}

miopen_enum! {
    /// `miopenBatchNormMode_t`.
    BnMode { PerActivation = 0, Spatial = 1 }
}

miopen_enum! {
    /// `miopenFusionDirection_t`. Only vertical fusion is implemented.
    FusionDirection { Vertical = 0, Horizontal = 1 }
}

miopen_enum! {
    /// `miopenConvolutionAttrib_t`, plus conflux's `AllowTf32` (1000) and `ConstantWeights`
    /// (1001), not in MIOpen.
    ConvAttrib { Fp16AltImpl = 0, Deterministic = 1, Fp8RoundingMode = 2, AllowTf32 = 1000, ConstantWeights = 1001 }
}

miopen_enum! {
    /// `miopenConvolutionFindMode_t` (from miopen_internal.h). 4 is reserved.
    FindMode { Normal = 1, Fast = 2, Hybrid = 3, DynamicHybrid = 5 }
}

miopen_enum! {
    /// `miopenTensorOp_t`.
    TensorOp { Add = 0, Mul = 1, Min = 2, Max = 3 }
}

/// Convolution direction of a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Forward,
    BackwardData,
    BackwardWeights,
}

impl Direction {
    /// The letter MIOpen uses in problem keys.
    pub fn letter(self) -> char {
        match self {
            Direction::Forward => 'F',
            Direction::BackwardData => 'B',
            Direction::BackwardWeights => 'W',
        }
    }
}
