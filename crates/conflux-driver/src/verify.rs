//! Verification against conflux's f64 reference: relative L2 error (‖got − want‖ / ‖want‖,
//! non-finite mismatches always fail) against `reference::compare::tolerance(dtype)`, printed
//! in MIOpen's words. Failures set a bit in the session, which becomes the exit code.

use crate::session::Session;
use conflux::reference::compare::{self, Comparison};
use conflux::DataType;
use serde_json::json;

/// Which of MIOpen's message families a check prints.
#[derive(Clone, Copy)]
pub enum Style {
    /// Convolutions: `Forward Convolution Verifies OK on CPU reference (err < tol)` / `… FAILED: err > tol`.
    Conv,
    /// Activation, fusion, batch norm: `Forward Activation Verifies on CPU and GPU`.
    Plain,
}

/// Exit-code bits, as MIOpenDriver ORs them (shifted down 8 so they fit an exit status).
pub const FWD: u32 = 1;
pub const BWD: u32 = 2;
pub const WRW: u32 = 4;
pub const OTHER: u32 = 8;

/// `CONFLUX_DRIVER_FAULT=1` corrupts the result before comparing: a test that the failure
/// path (message and exit code) works without a broken kernel.
fn inject_fault(got: &mut [f64]) {
    if std::env::var("CONFLUX_DRIVER_FAULT").is_ok_and(|v| v != "0") {
        if let Some(v) = got.first_mut() {
            *v += 1.0 + v.abs() * 10.0;
        }
    }
}

/// The outcome of one comparison.
pub struct Outcome {
    pub ok: bool,
    pub err: f64,
    pub tol: f64,
    /// Which rule failed and where, when it failed.
    pub why: Option<String>,
}

/// The tolerance of a check: `--tolerance` when given, else conflux's for `dtype` (TF32's for
/// f32 when the session lets convolutions use TF32) times `scale` (for longer reductions).
pub fn tolerance(s: &Session, dtype: DataType, scale: f64) -> f64 {
    let base = if dtype == DataType::Float && s.tf32_math() { compare::TF32_TOLERANCE } else { compare::tolerance(dtype) };
    s.tolerance.unwrap_or(base * scale)
}

/// Compare `got` with `want` without printing; record a failure under `bit` and the JSON entry.
pub fn compare(s: &Session, what: &str, bit: u32, got: &mut [f64], want: &[f64], tol: f64) -> Outcome {
    inject_fault(got);
    let c = Comparison::new(got, want);
    let verdict = compare::check(got, want, tol);
    let ok = verdict.is_ok() && c.rel_l2 <= tol;
    if !ok {
        s.fail(bit);
    }
    s.out.push("verify", json!({ "what": what, "error": finite_or_null(c.rel_l2), "max_abs": finite_or_null(c.max_abs), "tolerance": tol, "ok": ok }));
    Outcome { ok, err: c.rel_l2, tol, why: verdict.err().or_else(|| (!ok).then(|| format!("error {:.3e} > tolerance {tol:.1e}", c.rel_l2))) }
}

/// Compare and print the verdict in MIOpen's words for `style`.
#[allow(clippy::too_many_arguments)]
pub fn check(s: &Session, what: &str, style: Style, bit: u32, got: &mut [f64], want: &[f64], dtype: DataType, scale: f64) -> bool {
    let o = compare(s, what, bit, got, want, tolerance(s, dtype, scale));
    let (err, tol) = (o.err, o.tol);
    match (style, o.ok) {
        (Style::Conv, true) => s.out.line(format!("{what} Verifies OK on CPU reference ({err:.6e} < {tol:.1e})")),
        (Style::Plain, true) => s.out.line(format!("{what} Verifies on {} ({err:.6e} < {tol:.1e})", s.verified_on())),
        (_, false) => {
            s.out.line(format!("{what} FAILED: {err:.6e} > {tol:.1e}"));
            if let Some(why) = &o.why {
                s.out.line(format!("  {why}"));
            }
        }
    }
    o.ok
}

/// JSON has no NaN/inf; write null for them.
pub fn finite_or_null(v: f64) -> serde_json::Value {
    if v.is_finite() { json!(v) } else { serde_json::Value::Null }
}
