//! Find progress on stderr (issue #8 §4): the handle's progress hook draws an `indicatif`
//! bar when stderr is a terminal, and writes one plain line per timed candidate otherwise
//! (logs, CI, pipes), so long searches (`-s 1`) show where they are. stdout is untouched:
//! MIOpen's lines and `--json` stay as they were.

use conflux::conv::{FindProgress, FindProgressFn};
use conflux::Handle;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

/// Report every Find this handle runs (conv Find, fusion plans compiled with a timing find mode).
pub fn install(handle: &Handle) {
    let hook: FindProgressFn = if std::io::stderr().is_terminal() { bar() } else { Arc::new(|p: &FindProgress| eprintln!("{}", line(p))) };
    handle.set_find_progress(Some(hook));
}

/// " [config]" when the candidate is a tuning configuration.
fn config(p: &FindProgress) -> String {
    p.config.map(|c| format!(" [{c}]")).unwrap_or_default()
}

/// The plain form: `Find: step 3/7 SolverName [config] 0.123 ms` (or `failed: reason`).
pub fn line(p: &FindProgress) -> String {
    let head = format!("Find: step {}/{} {}{}", p.step, p.total, p.solver, config(p));
    match &p.outcome {
        Ok(ms) => format!("{head} {ms:.3} ms"),
        Err(e) => format!("{head} failed: {e}"),
    }
}

/// A bar per Find: created at step 1 with the Find's total, cleared after the last step so
/// the driver's own lines (the chosen solver) follow on a clean screen.
fn bar() -> FindProgressFn {
    let current: Mutex<Option<ProgressBar>> = Mutex::new(None);
    Arc::new(move |p: &FindProgress| {
        let mut slot = current.lock().unwrap_or_else(|e| e.into_inner());
        if p.step == 1 || slot.is_none() {
            if let Some(old) = slot.take() {
                old.finish_and_clear();
            }
            let b = ProgressBar::with_draw_target(Some(p.total as u64), ProgressDrawTarget::stderr());
            b.set_style(ProgressStyle::with_template("Find [{bar:30}] {pos}/{len} {msg}").expect("valid template").progress_chars("=> "));
            *slot = Some(b);
        }
        let b = slot.as_ref().expect("bar just created");
        b.set_position(p.step as u64);
        match &p.outcome {
            Ok(ms) => b.set_message(format!("{}{} {ms:.3} ms", p.solver, config(p))),
            // Failures stay on screen above the bar.
            Err(_) => b.println(line(p)),
        }
        if p.step >= p.total {
            b.finish_and_clear();
            *slot = None;
        }
    })
}
