//! Tensor descriptors with MIOpen's rules: lengths always in N,C,(D,)H,W order, the layout
//! only decides the strides, and every size computation is checked for overflow.

use crate::error::{Error, Result};
use crate::types::{DataType, Layout};
use crate::{bail, ensure};

/// Most dimensions a descriptor may have.
pub const MAX_DIMS: usize = 8;

/// Shape, strides and element type of a tensor. Equality compares type, lengths and strides.
#[derive(Clone, Debug)]
pub struct TensorDesc {
    dtype: DataType,
    lens: Vec<usize>,
    strides: Vec<usize>,
    /// Element space `Σ(len−1)·stride + 1`, computed once with overflow checks.
    space: usize,
}

impl PartialEq for TensorDesc {
    fn eq(&self, o: &Self) -> bool {
        self.dtype == o.dtype && self.lens == o.lens && self.strides == o.strides
    }
}
impl Eq for TensorDesc {}

impl std::hash::Hash for TensorDesc {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.dtype.hash(h);
        self.lens.hash(h);
        self.strides.hash(h);
    }
}

/// Row-major strides over `lens` taken in the order `order` (outermost first).
fn strides_in_order(lens: &[usize], order: &[usize]) -> Result<Vec<usize>> {
    let mut strides = vec![0usize; lens.len()];
    let mut acc: usize = 1;
    for &d in order.iter().rev() {
        strides[d] = acc;
        acc = acc
            .checked_mul(lens[d])
            .ok_or_else(|| Error::bad_parm(format!("tensor of lengths {lens:?} overflows the address space")))?;
    }
    Ok(strides)
}

impl TensorDesc {
    /// Packed descriptor in N,C,(D,)H,W row-major order (MIOpen's default).
    pub fn new(dtype: DataType, lens: &[usize]) -> Result<TensorDesc> {
        Self::check_lens(lens)?;
        let order: Vec<usize> = (0..lens.len()).collect();
        let strides = strides_in_order(lens, &order)?;
        Self::build(dtype, lens, strides)
    }

    /// Packed 4-D NCHW descriptor.
    pub fn new_4d(dtype: DataType, n: usize, c: usize, h: usize, w: usize) -> Result<TensorDesc> {
        Self::new(dtype, &[n, c, h, w])
    }

    /// Packed descriptor with the strides of `layout`; `lens` stay in N,C,(D,)H,W order.
    pub fn with_layout(dtype: DataType, layout: Layout, lens: &[usize]) -> Result<TensorDesc> {
        Self::check_lens(lens)?;
        ensure!(
            lens.len() == layout.rank(),
            BadParm,
            "layout {} needs {} lengths, got {}",
            layout.name(),
            layout.rank(),
            lens.len()
        );
        let order: Vec<usize> = match layout {
            Layout::NCHW | Layout::NCDHW => (0..lens.len()).collect(),
            Layout::NHWC => vec![0, 2, 3, 1],
            Layout::NDHWC => vec![0, 2, 3, 4, 1],
            Layout::CHWN => vec![1, 2, 3, 0],
            Layout::NCHWc4 | Layout::NCHWc8 | Layout::CHWNc4 | Layout::CHWNc8 => {
                let v = if matches!(layout, Layout::NCHWc4 | Layout::CHWNc4) { 4 } else { 8 };
                ensure!(lens[1] % v == 0, BadParm, "layout {} needs C divisible by {v}, got C={}", layout.name(), lens[1]);
                bail!(
                    NotImplemented,
                    "vectorized layout {} is not supported by conflux (use NCHW or NHWC)",
                    layout.name()
                );
            }
        };
        let strides = strides_in_order(lens, &order)?;
        Self::build(dtype, lens, strides)
    }

    /// Descriptor with explicit strides (each > 0).
    pub fn with_strides(dtype: DataType, lens: &[usize], strides: &[usize]) -> Result<TensorDesc> {
        Self::check_lens(lens)?;
        ensure!(
            strides.len() == lens.len(),
            BadParm,
            "{} strides given for {} lengths",
            strides.len(),
            lens.len()
        );
        if let Some(i) = strides.iter().position(|&s| s == 0) {
            bail!(BadParm, "stride of dimension {i} is 0; strides must be > 0");
        }
        Self::build(dtype, lens, strides.to_vec())
    }

    fn check_lens(lens: &[usize]) -> Result<()> {
        ensure!(
            !lens.is_empty() && lens.len() <= MAX_DIMS,
            BadParm,
            "a tensor has 1 to {MAX_DIMS} dimensions, got {}",
            lens.len()
        );
        if let Some(i) = lens.iter().position(|&l| l == 0) {
            bail!(BadParm, "length of dimension {i} is 0; lengths must be > 0");
        }
        Ok(())
    }

    fn build(dtype: DataType, lens: &[usize], strides: Vec<usize>) -> Result<TensorDesc> {
        let overflow = || Error::bad_parm(format!("tensor of lengths {lens:?} and strides {strides:?} overflows the address space"));
        let mut span: usize = 0;
        for (&l, &s) in lens.iter().zip(&strides) {
            span = (l - 1).checked_mul(s).and_then(|t| span.checked_add(t)).ok_or_else(overflow)?;
        }
        let space = span.checked_add(1).ok_or_else(overflow)?;
        // Element count and byte size must be representable too (the count can exceed the
        // space when strides overlap).
        lens.iter().try_fold(1usize, |a, &l| a.checked_mul(l)).ok_or_else(overflow)?;
        space.checked_mul(dtype.size()).filter(|&b| b <= isize::MAX as usize).ok_or_else(overflow)?;
        Ok(TensorDesc { dtype, lens: lens.to_vec(), strides, space })
    }

    pub fn dtype(&self) -> DataType { self.dtype }
    pub fn lens(&self) -> &[usize] { &self.lens }
    pub fn strides(&self) -> &[usize] { &self.strides }
    pub fn rank(&self) -> usize { self.lens.len() }
    /// Number of elements (product of lengths).
    pub fn element_count(&self) -> usize { self.lens.iter().product() }
    /// Elements spanned in memory: `Σ(len−1)·stride + 1`.
    pub fn element_space(&self) -> usize { self.space }
    /// Bytes spanned in memory, as `miopenGetTensorNumBytes` reports.
    pub fn num_bytes(&self) -> usize { self.space * self.dtype.size() }
    /// True when no element is skipped or aliased (count equals space).
    pub fn is_packed(&self) -> bool { self.element_count() == self.space }

    /// Same lengths and strides with another element type.
    pub fn with_dtype(&self, dtype: DataType) -> Result<TensorDesc> {
        Self::build(dtype, &self.lens, self.strides.clone())
    }

    pub fn n(&self) -> usize { self.lens[0] }
    pub fn c(&self) -> usize { self.lens[1] }
    /// Spatial lengths (D,)H,W of a 3-D or larger tensor.
    pub fn spatial(&self) -> &[usize] { &self.lens[2.min(self.lens.len())..] }

    /// The packed layout these strides match, if any (NCHW-family or channels-last).
    pub fn packed_layout(&self) -> Option<Layout> {
        let candidates: &[Layout] = match self.rank() {
            4 => &[Layout::NCHW, Layout::NHWC, Layout::CHWN],
            5 => &[Layout::NCDHW, Layout::NDHWC],
            _ => &[],
        };
        candidates
            .iter()
            .copied()
            .find(|&l| TensorDesc::with_layout(self.dtype, l, &self.lens).map(|d| d == *self).unwrap_or(false))
    }

    /// True when C is the innermost (stride-1) dimension and N,C,(D,)H,W would not be packed.
    pub fn is_channels_last(&self) -> bool {
        self.rank() >= 3 && self.strides[1] == 1 && self.lens[1] > 1 && self.strides[self.rank() - 1] != 1
    }

    /// Linear element offset of a multi-index (no bounds check beyond debug asserts).
    #[inline]
    pub fn offset(&self, idx: &[usize]) -> usize {
        debug_assert_eq!(idx.len(), self.lens.len());
        idx.iter().zip(&self.strides).map(|(i, s)| i * s).sum()
    }

    /// Short text form used in logs and keys: `FP32 2x3x4x5 s60x20x5x1`.
    pub fn key(&self) -> String {
        let j = |v: &[usize]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x");
        format!("{} {} s{}", self.dtype.short(), j(&self.lens), j(&self.strides))
    }
}

/// Iterate all multi-indices of `lens` in row-major order, calling `f` with each.
pub fn for_each_index(lens: &[usize], mut f: impl FnMut(&[usize])) {
    if lens.iter().any(|&l| l == 0) {
        return;
    }
    let mut idx = vec![0usize; lens.len()];
    loop {
        f(&idx);
        let mut d = lens.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < lens[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}
