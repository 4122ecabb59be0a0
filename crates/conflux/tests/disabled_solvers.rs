//! `CONFLUX_DISABLE_SOLVERS`: a named solver refuses every problem on every selection path
//! (immediate choice, a solution id, the support matrix), with the reason; the rest still run.
//! Its own test binary: the variable is read once per process.

mod support;

use conflux::conv::Choice;
use conflux::{DataType, Handle};
use support::*;

#[test]
fn disabled_solver_refuses_on_every_path() {
    // SAFETY: set before this process reads it, and this binary has no other test thread.
    unsafe { std::env::set_var("CONFLUX_DISABLE_SOLVERS", " CpuConvSinglePixel ,9999") };
    let h = Handle::cpu();
    let c = grouped_case(&(DataType::Float, &[1, 96, 1, 1], &[4, 96, 1, 1], 1, 0, 1, 1, Lay::Packed));
    let fp = c.fused(Dir::Forward);
    let id = solution_id("CpuConvSinglePixel");
    let chosen = conflux::search::choose(&h, &fp, Choice::Auto, 0).unwrap();
    assert_ne!(chosen.name(), "CpuConvSinglePixel");
    let Err(err) = conflux::search::choose(&h, &fp, Choice::Solution(id), 0) else { panic!("a disabled solution ran") };
    assert!(err.reason.contains("disabled by CONFLUX_DISABLE_SOLVERS"), "{err}");
    let row = conflux::search::support_matrix(&fp, h.device().info()).into_iter().find(|i| i.solver.solution_id() == id).unwrap();
    assert_eq!(row.verdict, Err("disabled by CONFLUX_DISABLE_SOLVERS".to_string()));
    // What still runs gives the reference's answer.
    assert!(check_solver(&h, &c, Dir::Forward, chosen.solution_id(), (1.0, 0.0), conflux::reference::fill::Fill::SmallInt(-2, 2), 0.0, 5));
}
