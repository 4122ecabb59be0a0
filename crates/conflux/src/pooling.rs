//! `miopenPoolingDescriptor_t`: window, padding and stride of a 2-D or 3-D pooling, its mode,
//! and how max pooling records the position of each maximum for the backward pass.

use crate::error::Result;
use crate::tensor::TensorDesc;
use crate::{bail, ensure};

macro_rules! c_enum {
    ($(#[$m:meta])* $name:ident { $($var:ident = $val:expr),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(i32)]
        pub enum $name { $($var = $val),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$var),+];
        }
        impl TryFrom<i32> for $name {
            type Error = $crate::error::Error;
            fn try_from(v: i32) -> $crate::error::Result<$name> {
                match v {
                    $($val => Ok($name::$var),)+
                    _ => Err($crate::error::Error::bad_parm(format!("{} value {v} is not defined", stringify!($name)))),
                }
            }
        }
    };
}
pub(crate) use c_enum;

c_enum! {
    /// `miopenPoolingMode_t`.
    PoolingMode { Max = 0, Average = 1, AverageInclusive = 2 }
}

c_enum! {
    /// `miopenIndexType_t`: the unsigned integer type of the recorded max positions.
    IndexType { U8 = 0, U16 = 1, U32 = 2, U64 = 3 }
}

c_enum! {
    /// `miopenPoolingWorkspaceIndexMode_t`: a maximum's position inside its window (Mask) or
    /// inside its input plane / volume (Image).
    IndexMode { Mask = 0, Image = 1 }
}

impl IndexType {
    pub fn size(self) -> usize {
        match self {
            IndexType::U8 => 1,
            IndexType::U16 => 2,
            IndexType::U32 => 4,
            IndexType::U64 => 8,
        }
    }
    /// The largest value of the type.
    pub fn max(self) -> u64 {
        match self {
            IndexType::U8 => u8::MAX as u64,
            IndexType::U16 => u16::MAX as u64,
            IndexType::U32 => u32::MAX as u64,
            IndexType::U64 => u64::MAX,
        }
    }
}

/// A pooling layer. `window`, `pads` and `strides` have one entry per spatial dimension
/// (2 or 3; empty until set).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolingDesc {
    pub mode: PoolingMode,
    pub window: Vec<usize>,
    pub pads: Vec<usize>,
    pub strides: Vec<usize>,
    pub index_type: IndexType,
    pub index_mode: IndexMode,
}

impl Default for PoolingDesc {
    /// Not yet set (as MIOpen's created descriptor): no spatial dimensions, 8-bit mask indices.
    fn default() -> PoolingDesc {
        PoolingDesc { mode: PoolingMode::Max, window: Vec::new(), pads: Vec::new(), strides: Vec::new(), index_type: IndexType::U8, index_mode: IndexMode::Mask }
    }
}

impl PoolingDesc {
    /// A 2-D or 3-D pooling. Windows and strides must be ≥ 1 and pads ≥ 0. The index type
    /// starts as 8-bit and the index mode as Mask for 2-D, Image for 3-D (MIOpen's defaults).
    pub fn new(mode: PoolingMode, window: &[i64], pads: &[i64], strides: &[i64]) -> Result<PoolingDesc> {
        let dims = window.len();
        ensure!((2..=3).contains(&dims), BadParm, "pooling descriptor: {dims} spatial dimensions; conflux pools 2 or 3");
        ensure!(pads.len() == dims && strides.len() == dims, BadParm, "pooling descriptor: window, pads and strides need {dims} entries each");
        let conv = |what: &str, v: &[i64], min: i64| -> Result<Vec<usize>> {
            v.iter()
                .map(|&e| {
                    ensure!(e >= min && e <= i32::MAX as i64, BadParm, "pooling descriptor: {what} {v:?} must be ≥ {min}");
                    Ok(e as usize)
                })
                .collect()
        };
        let index_mode = if dims == 3 { IndexMode::Image } else { IndexMode::Mask };
        Ok(PoolingDesc { mode, window: conv("window", window, 1)?, pads: conv("pads", pads, 0)?, strides: conv("strides", strides, 1)?, index_type: IndexType::U8, index_mode })
    }

    /// Spatial dimensions (0 while unset).
    pub fn dims(&self) -> usize { self.window.len() }

    fn check_input(&self, x: &TensorDesc) -> Result<()> {
        ensure!(self.dims() > 0, BadParm, "pooling: the pooling descriptor was never set (miopenSet2dPoolingDescriptor / miopenSetNdPoolingDescriptor)");
        ensure!(
            x.rank() == self.dims() + 2,
            BadParm,
            "pooling: a {}-D pooling needs {}-D tensors; x is {}-D ({})",
            self.dims(),
            self.dims() + 2,
            x.rank(),
            x.key()
        );
        Ok(())
    }

    /// Output lengths for input `x`: N, C, then max(1, ⌊(in + 2·pad − window) / stride⌋ + 1)
    /// per spatial dimension (the quotient truncated toward zero, as MIOpen computes it).
    pub fn output_lens(&self, x: &TensorDesc) -> Result<Vec<usize>> {
        self.check_input(x)?;
        let mut out = vec![x.n(), x.c()];
        for (i, &len) in x.spatial().iter().enumerate() {
            let span = len as i64 + 2 * self.pads[i] as i64 - self.window[i] as i64;
            out.push((span / self.strides[i] as i64 + 1).max(1) as usize);
        }
        Ok(out)
    }

    /// Index workspace bytes for output `y`: one index per output element for max pooling
    /// (stored packed in N, C, (D,) H, W order whatever y's layout), none for average.
    pub fn workspace_bytes(&self, y: &TensorDesc) -> usize {
        match self.mode {
            PoolingMode::Max => y.element_count() * self.index_type.size(),
            _ => 0,
        }
    }

    /// The largest index max pooling records for input `x`, which must stay below the index
    /// type's maximum (that value is reserved, as in MIOpen).
    pub fn check_index_range(&self, x: &TensorDesc) -> Result<()> {
        let count: u64 = match self.index_mode {
            IndexMode::Mask => self.window.iter().product::<usize>() as u64,
            IndexMode::Image => x.spatial().iter().product::<usize>() as u64,
        };
        if count >= self.index_type.max() {
            bail!(
                BadParm,
                "pooling: {:?} indices of type {:?} cannot number the {count} positions of {} (use a wider type with miopenSetPoolingIndexType)",
                self.index_mode,
                self.index_type,
                if self.index_mode == IndexMode::Mask { "a window" } else { "an input plane" }
            );
        }
        Ok(())
    }

    /// The geometry as problems and kernels see it (three spatial dimensions).
    pub fn geom(&self) -> PoolGeom {
        let (window, pad, stride) = self.geometry3();
        PoolGeom { mode: self.mode, window, pad, stride, index_type: self.index_type, index_mode: self.index_mode }
    }

    /// Window, pads and strides as three dimensions (D, H, W; a 2-D pooling has D = 1 window,
    /// 0 pad, stride 1).
    pub fn geometry3(&self) -> ([usize; 3], [usize; 3], [usize; 3]) {
        let three = |v: &[usize], fill: usize| if v.len() == 3 { [v[0], v[1], v[2]] } else { [fill, v[0], v[1]] };
        (three(&self.window, 1), three(&self.pads, 0), three(&self.strides, 1))
    }
}

/// Pooling geometry in three spatial dimensions (a 2-D pooling has D = 1: window 1, pad 0,
/// stride 1), with what max pooling records.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolGeom {
    pub mode: PoolingMode,
    pub window: [usize; 3],
    pub pad: [usize; 3],
    pub stride: [usize; 3],
    pub index_type: IndexType,
    pub index_mode: IndexMode,
}

impl PoolGeom {
    /// Divisor of an average over the window of output `o` clipped to input extent `input`
    /// (exclusive: the positions inside the input, at least 1; inclusive: the whole window).
    pub fn divisor(&self, o: [usize; 3], input: [usize; 3]) -> usize {
        if self.mode == PoolingMode::AverageInclusive {
            return self.window.iter().product();
        }
        let mut count = 1;
        for a in 0..3 {
            let (lo, hi) = self.window_range(a, o[a], input[a]);
            count *= hi.saturating_sub(lo);
        }
        count.max(1)
    }

    /// Input positions [lo, hi) along axis `a` covered by output position `o`; empty (lo = hi)
    /// for a window wholly in the padding, which a padding of at least the window allows (a max
    /// over it is -inf, an average 0).
    #[inline(always)]
    pub fn window_range(&self, a: usize, o: usize, input: usize) -> (usize, usize) {
        let start = ((o * self.stride[a]) as i64 - self.pad[a] as i64).max(0);
        let end = ((o * self.stride[a]) as i64 - self.pad[a] as i64 + self.window[a] as i64).min(input as i64);
        (start as usize, end.max(start) as usize)
    }

    /// Output positions [lo, hi) along axis `a` whose windows cover input position `i`.
    #[inline(always)]
    pub fn outputs_covering(&self, a: usize, i: usize, output: usize) -> (usize, usize) {
        let (k, s, p) = (self.window[a] as i64, self.stride[a] as i64, self.pad[a] as i64);
        let q = i as i64 + p; // position in the padded input
        let lo = if q - k + 1 <= 0 { 0 } else { (q - k + 1 + s - 1) / s };
        let hi = (q / s + 1).min(output as i64);
        (lo as usize, hi.max(lo) as usize)
    }

    /// The index max pooling records for input position `pos` as the maximum of output `o`.
    #[inline(always)]
    pub fn index_of(&self, pos: [usize; 3], o: [usize; 3], input: [usize; 3]) -> u64 {
        match self.index_mode {
            IndexMode::Image => ((pos[0] * input[1] + pos[1]) * input[2] + pos[2]) as u64,
            IndexMode::Mask => {
                let r = |a: usize| (pos[a] + self.pad[a] - o[a] * self.stride[a]) as u64;
                (r(0) * self.window[1] as u64 + r(1)) * self.window[2] as u64 + r(2)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DataType;

    #[test]
    fn output_size_follows_miopen() {
        let p = PoolingDesc::new(PoolingMode::Max, &[3, 3], &[1, 1], &[2, 2]).unwrap();
        let x = TensorDesc::new(DataType::Float, &[2, 3, 7, 8]).unwrap();
        assert_eq!(p.output_lens(&x).unwrap(), vec![2, 3, 4, 4]);
        // A window larger than the padded input still gives one output.
        let p = PoolingDesc::new(PoolingMode::Average, &[5, 5], &[0, 0], &[1, 1]).unwrap();
        let x = TensorDesc::new(DataType::Float, &[1, 1, 3, 3]).unwrap();
        assert_eq!(p.output_lens(&x).unwrap(), vec![1, 1, 1, 1]);
        assert_eq!(p.index_mode, IndexMode::Mask);
        let p3 = PoolingDesc::new(PoolingMode::Max, &[2, 2, 2], &[0, 0, 0], &[2, 2, 2]).unwrap();
        assert_eq!(p3.index_mode, IndexMode::Image);
        assert!(p3.output_lens(&x).is_err(), "3-D pooling of a 4-D tensor");
        assert!(PoolingDesc::new(PoolingMode::Max, &[0, 2], &[0, 0], &[1, 1]).is_err());
        assert!(PoolingDesc::new(PoolingMode::Max, &[2, 2], &[-1, 0], &[1, 1]).is_err());
    }

    #[test]
    fn index_range_reserves_the_type_maximum() {
        let mut p = PoolingDesc::new(PoolingMode::Max, &[2, 2], &[0, 0], &[2, 2]).unwrap();
        p.index_mode = IndexMode::Image;
        let x = TensorDesc::new(DataType::Float, &[1, 1, 16, 16]).unwrap();
        assert!(p.check_index_range(&x).is_err(), "256 positions in 8 bits");
        p.index_type = IndexType::U16;
        p.check_index_range(&x).unwrap();
    }
}
