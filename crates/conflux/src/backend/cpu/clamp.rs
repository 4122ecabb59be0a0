//! The activation a fused store applies after the bias, straight from registers: none, ReLU,
//! or ReLU capped at α (CLIPPEDRELU; ReLU6 is α = 6). One type for both, so every fast store
//! path that takes ReLU takes ReLU6 too.

/// min(max(v, 0), hi) when `on`; `hi` is +∞ for ReLU and never NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clamp {
    pub on: bool,
    pub hi: f32,
}

impl Clamp {
    pub const NONE: Clamp = Clamp { on: false, hi: f32::INFINITY };
    pub const RELU: Clamp = Clamp { on: true, hi: f32::INFINITY };

    /// CLIPPEDRELU with α; None for a NaN α, where the formula min(α, max(0, v)) gives
    /// max(0, v) but a clamp would give NaN.
    pub fn clipped(alpha: f32) -> Option<Clamp> {
        (!alpha.is_nan()).then_some(Clamp { on: true, hi: alpha })
    }

    /// The clamp of one value: a NaN v gives 0, as the generic formulas do. Vector code does
    /// the same with `max(v, 0)` (v first) then `min(·, hi)`.
    #[inline(always)]
    pub fn apply(self, v: f32) -> f32 {
        if !self.on {
            return v;
        }
        let r = if v > 0.0 { v } else { 0.0 };
        if r < self.hi { r } else { self.hi }
    }

    /// `apply` written as selects, so that a loop of it vectorizes (same values: a NaN v gives 0).
    #[inline(always)]
    pub fn apply_branch_free(self, v: f32) -> f32 {
        let r = if v > 0.0 { v } else { 0.0 };
        let c = if r < self.hi { r } else { self.hi };
        if self.on { c } else { v }
    }
}
