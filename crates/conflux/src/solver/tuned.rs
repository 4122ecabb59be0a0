//! How a tunable solver picks its configuration when it builds.

use super::BuildContext;
use crate::error::{Error, Result};

/// The configuration a tunable solver builds with: the one the environment variable `force`
/// names (for measuring a tuning space), else the tuned one recorded for this problem, else
/// `fallback` (the solver's heuristic).
pub fn chosen_config<C>(
    ctx: &dyn BuildContext,
    solver: &str,
    problem_key: &str,
    force: &str,
    parse: impl Fn(&str) -> Option<C>,
    fallback: impl FnOnce() -> C,
) -> Result<C> {
    if let Ok(s) = std::env::var(force) {
        return parse(&s).ok_or_else(|| Error::bad_parm(format!("{force}={s}: not a configuration of {solver}")));
    }
    Ok(ctx.tuned_config(solver, problem_key).and_then(|label| parse(&label)).unwrap_or_else(fallback))
}
