//! `--list-solvers`: the support matrix for one problem, taken from the solvers' own checks
//! (`search::support_matrix`), plus the solvers of other devices, which never apply here.

use crate::session::Session;
use conflux::fusion::FusedProblem;
use conflux::search::support_matrix;
use conflux::solver::registry;
use serde_json::json;

pub fn list_solvers(s: &Session, title: &str, fp: &FusedProblem) {
    let h = &s.handle;
    s.out.line(format!("Solvers for {title} ({}) on {}:", fp.short_name(), h.device().name()));
    let row = |name: &str, id: u64, algo: &str, device: &str, verdict: Result<(), String>| {
        let text = match &verdict {
            Ok(()) => "applicable".to_string(),
            Err(why) => format!("not applicable: {why}"),
        };
        s.out.line(format!("  {name:<30} id {id:>3}  {algo:<34} {text}"));
        s.out.push(
            "solvers",
            json!({ "problem": title, "name": name, "id": id, "algorithm": algo, "device": device,
                    "applicable": verdict.is_ok(), "reason": verdict.err() }),
        );
    };
    for info in support_matrix(fp, h.device().info()) {
        let sv = info.solver;
        row(sv.name(), sv.solution_id(), sv.algorithm().name(), &format!("{:?}", sv.device()), info.verdict);
    }
    for sv in registry().filter(|sv| sv.device() != h.device_kind()) {
        let why = format!("a {:?} solver; this handle is on {}", sv.device(), h.device().name());
        row(sv.name(), sv.solution_id(), sv.algorithm().name(), &format!("{:?}", sv.device()), Err(why));
    }
}
