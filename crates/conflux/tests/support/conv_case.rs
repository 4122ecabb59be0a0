//! One convolution as the user states it (`ConvCase`: descriptor, x, w, y), its three
//! directions (`Dir`) with the tensors in each direction's roles, and `check_solver`, the one
//! check of a single solver on a case.

use super::{assert_close, assert_gaps_untouched, assert_unchanged, download, expect_err, logical, misaligned_copy, poisoned, random, sentinel, upload};
use conflux::conv::api::{self, Choice, Workspace};
use conflux::conv::{self, ConvPerf};
use conflux::fusion::FusedProblem;
use conflux::reference::{self as r, fill::Fill};
use conflux::{Buffer, ConvDesc, ConvProblem, DevPtr, Handle, Status, TensorDesc};

/// A convolution direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// y = conv(x, w).
    Forward,
    /// dx = conv_bwd_data(dy, w).
    BackwardData,
    /// dw = conv_bwd_weights(dy, x).
    BackwardWeights,
}

impl Dir {
    pub const ALL: [Dir; 3] = [Dir::Forward, Dir::BackwardData, Dir::BackwardWeights];
}

/// A convolution as the user states it: x → y through w (transpose mode included).
#[derive(Clone)]
pub struct ConvCase {
    pub conv: ConvDesc,
    pub x: TensorDesc,
    pub w: TensorDesc,
    pub y: TensorDesc,
}

impl std::fmt::Debug for ConvCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} x {} w {} y {}", self.conv.key(), self.x.key(), self.w.key(), self.y.key())
    }
}

impl ConvCase {
    pub fn new(conv: &ConvDesc, x: &TensorDesc, w: &TensorDesc, y: &TensorDesc) -> ConvCase {
        ConvCase { conv: conv.clone(), x: x.clone(), w: w.clone(), y: y.clone() }
    }

    /// (first input, second input, output) descriptors of a direction: (x, w, y), (dy, w, dx)
    /// or (dy, x, dw).
    pub fn roles(&self, d: Dir) -> (&TensorDesc, &TensorDesc, &TensorDesc) {
        match d {
            Dir::Forward => (&self.x, &self.w, &self.y),
            Dir::BackwardData => (&self.y, &self.w, &self.x),
            Dir::BackwardWeights => (&self.y, &self.x, &self.w),
        }
    }

    pub fn problem(&self, d: Dir) -> ConvProblem {
        match d {
            Dir::Forward => ConvProblem::forward(&self.conv, &self.x, &self.w, &self.y),
            Dir::BackwardData => ConvProblem::backward_data(&self.conv, &self.y, &self.w, &self.x),
            Dir::BackwardWeights => ConvProblem::backward_weights(&self.conv, &self.y, &self.x, &self.w),
        }
        .unwrap_or_else(|e| panic!("{d:?} {self:?}: {e}"))
    }

    pub fn fused(&self, d: Dir) -> FusedProblem {
        FusedProblem::conv(self.problem(d))
    }

    /// α·op(a, b) + β·old by the f64 reference (element-space layout of the output).
    pub fn reference(&self, d: Dir, (alpha, beta): (f64, f64), a: &[f64], b: &[f64], old: &[f64]) -> Vec<f64> {
        let mut out = old.to_vec();
        let c = &self.conv;
        match d {
            Dir::Forward => r::conv_forward_alpha_beta(alpha, beta, c, &self.x, a, &self.w, b, &self.y, &mut out),
            Dir::BackwardData => r::conv_backward_data_alpha_beta(alpha, beta, c, &self.y, a, &self.w, b, &self.x, &mut out),
            Dir::BackwardWeights => r::conv_backward_weights_alpha_beta(alpha, beta, c, &self.y, a, &self.x, b, &self.w, &mut out),
        }
        .unwrap();
        out
    }

    /// out = α·op(a, b) + β·out through `conv::api` with `choice`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(&self, h: &Handle, d: Dir, a: DevPtr, b: DevPtr, out: DevPtr, ab: (f64, f64), choice: Choice, ws: Workspace) -> conflux::Result<()> {
        let c = &self.conv;
        match d {
            Dir::Forward => api::forward(h, c, &self.x, a, &self.w, b, &self.y, out, ab.0, ab.1, choice, ws),
            Dir::BackwardData => api::backward_data(h, c, &self.y, a, &self.w, b, &self.x, out, ab.0, ab.1, choice, ws),
            Dir::BackwardWeights => api::backward_weights(h, c, &self.y, a, &self.x, b, &self.w, out, ab.0, ab.1, choice, ws),
        }
    }

    /// Find in direction `d` (MIOpen's FindConvolution*Algorithm).
    #[allow(clippy::too_many_arguments)]
    pub fn find(&self, h: &Handle, d: Dir, a: DevPtr, b: DevPtr, out: DevPtr, count: usize, exhaustive: bool, ws: Workspace) -> conflux::Result<Vec<ConvPerf>> {
        let c = &self.conv;
        match d {
            Dir::Forward => conv::find_forward(h, c, &self.x, a, &self.w, b, &self.y, out, count, exhaustive, ws),
            Dir::BackwardData => conv::find_backward_data(h, c, &self.y, a, &self.w, b, &self.x, out, count, exhaustive, ws),
            Dir::BackwardWeights => conv::find_backward_weights(h, c, &self.y, a, &self.x, b, &self.w, out, count, exhaustive, ws),
        }
    }
}

/// The ids of the applicable solvers of a problem on this handle's device, in registry order.
pub fn applicable_ids(h: &Handle, fp: &FusedProblem) -> Vec<u64> {
    conflux::search::support_matrix(fp, h.device().info()).into_iter().filter(|i| i.verdict.is_ok()).map(|i| i.solver.solution_id()).collect()
}

/// A workspace of `bytes` in a buffer of at least 64 bytes filled with 0xFF (NaN in every
/// float type); keep the buffer alive while the workspace is used.
pub fn poisoned_ws(h: &Handle, bytes: usize) -> (Buffer, Workspace) {
    let n = bytes.max(64);
    let mut buf = h.alloc(n).unwrap();
    h.write(&mut buf, &vec![0xFF; n]).unwrap();
    let ws = Workspace { ptr: buf.ptr(), bytes };
    (buf, ws)
}

/// Hold solver `id` to every check on `c` in direction `d`. Returns false when the solver
/// does not apply (after checking that the API refuses it by id too, saying why, and writes
/// nothing); otherwise, with inputs of `fill` from `seed`:
///
/// * its workspace size through the API (`solution_workspace`) is the solver's own;
/// * `compile_solution` builds it, and the runs after it build nothing more;
/// * it runs by id (`Choice::Solution`) with α, β = `ab` into an output NaN-poisoned when
///   β = 0 (else holding old values β must read) with a NaN-poisoned workspace of exactly
///   the size it asked for, and matches the f64 reference within `tol` (0: bit for bit);
/// * nothing is written between the output's described elements;
/// * run again (same invoker, output and workspace poisoned anew) it gives the same bits;
/// * both inputs are left untouched.
#[allow(clippy::too_many_arguments)]
#[must_use = "false means the solver refused the problem: assert it where it must apply"]
pub fn check_solver(h: &Handle, c: &ConvCase, d: Dir, id: u64, ab: (f64, f64), fill: Fill, tol: f64, seed: u64) -> bool {
    let solver = conflux::solver::find_by_id(id).unwrap_or_else(|| panic!("no solver has id {id}"));
    let (alpha, beta) = ab;
    let label = format!("{} (id {id}) {d:?} α,β={ab:?} {c:?} {fill:?} on {}", solver.name(), h.device().name());
    let (problem, fp) = (c.problem(d), c.fused(d));
    let (ad, bd, od) = c.roles(d);
    let (a, b) = (random(h, ad, fill, seed), random(h, bd, fill, seed + 1));
    if let Err(why) = solver.check(&fp, h.device().info()) {
        let out = sentinel(h, od, 7.0);
        let res = c.run(h, d, a.ptr(), b.ptr(), out.ptr(), ab, Choice::Solution(id), Workspace::default());
        let needles = if solver.device() == h.device_kind() { ["does not apply", why.as_str()] } else { ["another device", ""] };
        expect_err(&format!("{label}: refused by check, run by id"), res, Status::BadParm, &needles);
        assert_unchanged(&format!("{label}: output of a refused run"), h, &out);
        return false;
    }
    let need = solver.workspace_bytes(&fp);
    assert_eq!(conv::solution_workspace(h, &problem, id).unwrap_or_else(|e| panic!("{label}: {e}")), need, "{label}: workspace size through the API");
    let old = random(h, od, fill, seed + 2);
    let want = c.reference(d, ab, &a.host, &b.host, &old.host);
    conv::compile_solution(h, &problem, id).unwrap_or_else(|e| panic!("{label}: compile: {e}"));
    let built = h.build_count();
    let mut first: Option<Vec<u8>> = None;
    for pass in 0..2 {
        let out = if beta == 0.0 { poisoned(h, od) } else { upload(h, od, &old.host) };
        let (_ws_buf, ws) = poisoned_ws(h, need);
        c.run(h, d, a.ptr(), b.ptr(), out.ptr(), (alpha, beta), Choice::Solution(id), ws).unwrap_or_else(|e| panic!("{label} pass {pass}: {e}"));
        let got = download(h, &out);
        assert_close(&format!("{label} pass {pass}"), &logical(od, &got), &logical(od, &want), tol);
        assert_gaps_untouched(&format!("{label} pass {pass}"), od, &got);
        let bytes = h.read(&out.buf).unwrap();
        match &first {
            None => first = Some(bytes),
            Some(f) => assert!(f == &bytes, "{label}: the second run of the same invoker gave different bits"),
        }
    }
    assert_eq!(h.build_count(), built, "{label}: running a compiled solution built again");
    assert_unchanged(&format!("{label}: first input"), h, &a);
    assert_unchanged(&format!("{label}: second input"), h, &b);
    true
}

/// `check_solver` twice on a case the solver must take: exact small integers with α = 1, β = 0
/// and no tolerance (bf16 in [−1, 1], whose sums stay exact longer), then normal data with
/// α = 0.75, β = 0.5 within the type's tolerance.
pub fn check_exact_and_scaled(h: &Handle, c: &ConvCase, d: Dir, id: u64, seed: u64) {
    let dt = c.x.dtype();
    let exact = if dt == conflux::DataType::BFloat16 { Fill::SmallInt(-1, 1) } else { Fill::SmallInt(-2, 2) };
    assert!(check_solver(h, c, d, id, (1.0, 0.0), exact, 0.0, seed), "solution {id} refused {c:?}");
    let tol = r::compare::tolerance(dt);
    assert!(check_solver(h, c, d, id, (0.75, 0.5), Fill::Normal, tol, seed + 1000), "solution {id} refused {c:?}");
}

/// Forward through solver `name` with x and y one element past a 16-byte boundary (the
/// kernels' element-wise fallback): exact small-integer data matches the f64 reference.
pub fn check_misaligned_forward(h: &Handle, c: &ConvCase, name: &str) {
    let inv = h.invoker(&c.fused(Dir::Forward), super::solver(name)).unwrap();
    let (x, w) = (random(h, &c.x, Fill::SmallInt(-2, 2), 7), random(h, &c.w, Fill::SmallInt(-2, 2), 8));
    let want = c.reference(Dir::Forward, (1.0, 0.0), &x.host, &w.host, &vec![0.0; c.y.element_space()]);
    let (_keep, xp) = misaligned_copy(h, &x);
    let y_buf = h.alloc(c.y.num_bytes() + 16).unwrap();
    let args = conflux::solver::RunArgs { x: xp, w: w.ptr(), y: y_buf.ptr().add(2), alpha: 1.0, beta: 0.0, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &[] };
    conflux::solver::invoke(&*inv, h, &args).unwrap();
    h.synchronize().unwrap();
    let bytes = h.read(&y_buf).unwrap();
    let got = conflux::element::decode(c.y.dtype(), &bytes[2..2 + c.y.num_bytes()]);
    assert_close(&format!("{name}: misaligned x and y"), &logical(&c.y, &got), &logical(&c.y, &want), 0.0);
}

/// Every configuration of forward solver `name`'s tuning space on `c` (at least `min_configs`
/// of them) with exact small-integer data, α = 1, β = 0: each matches the f64 reference bit
/// for bit.
pub fn check_every_configuration(h: &Handle, c: &ConvCase, name: &str, min_configs: usize) {
    check_every_configuration_in(h, c, Dir::Forward, name, min_configs)
}

/// `check_every_configuration` in direction `d` (plain convolutions: x = dx and y = dy in
/// backward-data, w = dw in backward-weights).
pub fn check_every_configuration_in(h: &Handle, c: &ConvCase, d: Dir, name: &str, min_configs: usize) {
    let s = super::solver(name);
    let fp = c.fused(d);
    let (ad, bd, od) = c.roles(d);
    let (a, b) = (random(h, ad, Fill::SmallInt(-2, 2), 11), random(h, bd, Fill::SmallInt(-2, 2), 12));
    let want = c.reference(d, (1.0, 0.0), &a.host, &b.host, &vec![0.0; od.element_space()]);
    let space = s.tuning_space(&fp);
    assert!(space.len() >= min_configs, "{name} {c:?}: tuning space {space:?}");
    for label in space {
        let inv = s.build_config(&fp, h.device(), &label).unwrap_or_else(|e| panic!("{label} {c:?}: {e}"));
        let out = poisoned(h, od);
        let (x, w, y) = match d {
            Dir::Forward => (a.ptr(), b.ptr(), out.ptr()),
            Dir::BackwardData => (out.ptr(), b.ptr(), a.ptr()),
            Dir::BackwardWeights => (b.ptr(), out.ptr(), a.ptr()),
        };
        let args = conflux::solver::RunArgs { x, w, y, alpha: 1.0, beta: 0.0, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &[] };
        conflux::solver::invoke(&*inv, h, &args).unwrap();
        h.synchronize().unwrap();
        assert_close(&format!("{label} {d:?} {c:?}"), &logical(od, &download(h, &out)), &logical(od, &want), 0.0);
    }
}

/// Every spec of `cases` in direction `d`: immediate mode chooses solver `name`, which matches
/// the reference on exact and α/β data (`check_exact_and_scaled`, seeds from `seed`).
pub fn check_chosen_cases(h: &Handle, cases: &[GroupedSpec], d: Dir, name: &str, seed: u64) {
    let id = super::solution_id(name);
    for (i, spec) in cases.iter().enumerate() {
        let c = grouped_case(spec);
        let chosen = conflux::search::choose(h, &c.fused(d), Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), name, "{c:?}");
        check_exact_and_scaled(h, &c, d, id, seed + 10 * i as u64);
    }
}

/// A 2-D case as the few-channels suites list them: (dtype, x lengths, w lengths, groups, pad,
/// stride, dilation, layout of x, w and y), the same in both spatial axes.
pub type GroupedSpec = (conflux::DataType, &'static [usize], &'static [usize], usize, i64, i64, i64, super::Lay);

/// Solver `name` refuses `spec` forward with a reason that contains `needle`.
pub fn check_refuses(h: &Handle, name: &str, spec: &GroupedSpec, needle: &str) {
    let c = grouped_case(spec);
    let why = super::solver(name).check(&c.fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains(needle), "{name} {c:?}: {why}");
}

pub fn grouped_case(&(dt, lx, lw, groups, pad, stride, dil, lay): &GroupedSpec) -> ConvCase {
    let mut conv = ConvDesc::new(conflux::ConvMode::Convolution, &[pad, pad], &[stride, stride], &[dil, dil]).unwrap();
    conv.set_groups(groups as i64).unwrap();
    let x = super::desc(dt, lx, lay);
    let w = super::desc(dt, lw, lay);
    let y = super::desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay);
    ConvCase::new(&conv, &x, &w, &y)
}
