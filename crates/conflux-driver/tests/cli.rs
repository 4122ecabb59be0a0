//! The built `conflux-driver` binary on the CPU backend: every subcommand verifies and exits 0
//! on small problems; wrong tolerances, injected faults, bad flags and impossible problems fail
//! with a message and a non-zero exit; bench, --list-solvers, --json and command logging work.

use std::process::{Command, Output};

/// Run the driver on the CPU with a private cache directory; extra environment in `env`.
fn driver_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let cache = tempfile::tempdir().expect("temp dir");
    // CONFLUX_DRIVER_BIN: where the binary lies when this test runs on another machine (.gpu/).
    let bin = std::env::var("CONFLUX_DRIVER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_conflux-driver").to_string());
    let mut c = Command::new(bin);
    c.args(args).env("CONFLUX_DEVICE", "cpu").env("CONFLUX_CACHE_DIR", cache.path()).env_remove("CONFLUX_LOG").env_remove("MIOPEN_ENABLE_LOGGING_CMD");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run conflux-driver")
}

fn driver(args: &[&str]) -> Output {
    driver_env(args, &[])
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Exits 0 and prints every `want` line fragment.
fn ok(args: &[&str], want: &[&str]) -> String {
    let o = driver(args);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{args:?} failed\nstdout:\n{out}\nstderr:\n{err}");
    for w in want {
        assert!(out.contains(w), "{args:?}: missing '{w}' in\n{out}");
    }
    assert!(!out.contains("FAILED"), "{args:?}:\n{out}");
    out
}

/// Exits with `code` and says `msg` somewhere.
fn fails(args: &[&str], env: &[(&str, &str)], code: i32, msg: &str) {
    let o = driver_env(args, env);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains(msg) || err.contains(msg), "{args:?}: missing '{msg}'\nstdout:\n{out}\nstderr:\n{err}");
}

/// The solution id of the solver called `name`, from conflux's registry (ids are never
/// written as numbers in the tests).
fn solution_id(name: &str) -> u64 {
    conflux::solver::find_by_name(name).unwrap_or_else(|| panic!("no solver is registered as {name:?}")).solution_id()
}

const SMALL_CONV: &[&str] = &["-n", "2", "-c", "4", "-H", "7", "-W", "6", "-k", "6", "-y", "3", "-x", "3", "-p", "1", "-q", "1"];

fn with<'a>(head: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
    head.iter().chain(tail).copied().collect()
}

#[test]
fn conv_every_direction_with_bias_verifies_and_times() {
    let out = ok(
        &with(&["conv"], &with(SMALL_CONV, &["-b", "1", "-t", "1", "-i", "2", "-w", "1"])),
        &[
            "PRNG seed: 12345678",
            "Forward Convolution Verifies OK on CPU reference",
            "Backward Convolution Data Verifies OK",
            "Backward Convolution Weights Verifies OK",
            "Forward Convolution Bias Verifies OK",
            "Backward Convolution Bias Verifies OK",
            "MIOpen Forward Conv. Algorithm: ",
            "CPU Kernel Time Forward Conv. Elapsed: ",
            "stats: fwd-conv3x3u1, 2, 4, 7, 6, 3, 3, 6,",
            "Wall-clock Time Backward Weights Conv. Elapsed",
        ],
    );
    assert!(out.starts_with("conflux-driver conv -n 2"), "{out}");
}

#[test]
fn conv_half_bf16_transpose_groups_strides_3d_nhwc() {
    ok(&["convfp16", "-n", "2", "-c", "4", "-H", "6", "-W", "5", "-k", "6", "-m", "trans", "-u", "2", "-v", "2", "-Y", "1", "-X", "1", "-g", "2"], &["Forward Convolution Verifies OK", "Backward Convolution Weights Verifies OK"]);
    ok(&["convbfp16", "-n", "1", "-c", "4", "-H", "9", "-W", "9", "-k", "8", "-y", "3", "-x", "3", "-u", "2", "-v", "2", "-l", "2", "-j", "2", "-p", "2", "-q", "2", "-F", "3", "--layout", "NHWC"], &["Forward Convolution Verifies OK", "Backward Convolution Data Verifies OK"]);
    ok(&["conv", "-_", "3", "-n", "1", "-c", "2", "-!", "4", "-H", "5", "-W", "5", "-k", "3", "-@", "2", "-y", "3", "-x", "3", "-$", "1", "-F", "5", "-z", "same"], &["Forward Convolution Verifies OK", "Backward Convolution Weights Verifies OK"]);
    ok(&["conv", "--spatial_dim", "3", "--in_d", "3", "-n", "1", "-c", "2", "-H", "4", "-W", "4", "-k", "2", "--fil_d", "1", "-F", "1", "--in_layout", "ndhwc", "--out_layout", "NDHWC", "--fil_layout", "NCDHW"], &["Forward Convolution Verifies OK"]);
}

/// `convint8`: int8 x and w, f32 y, forward only (MIOpen defines no int8 backward), on the
/// quantized solver; grouped, strided, NHWC; exact sums verify with zero error.
#[test]
fn convint8_forward_verifies_and_refuses_backward() {
    let quantized = format!("Solution: {}/CpuConvQuantized", solution_id("CpuConvQuantized"));
    let out = ok(&["convint8", "-n", "2", "-c", "8", "-H", "9", "-W", "7", "-k", "12", "-y", "3", "-x", "3", "-p", "1", "-q", "1", "-t", "1", "-i", "2"], &["forward only", "Forward Convolution Verifies OK on CPU reference (0.000000e0", &quantized]);
    assert!(!out.contains("Backward Convolution"), "{out}");
    ok(&["convint8", "-n", "1", "-c", "8", "-H", "10", "-W", "10", "-k", "8", "-y", "3", "-x", "3", "-u", "2", "-v", "2", "-g", "2", "-F", "1", "-S", "0", "--layout", "NHWC"], &["Forward Convolution Verifies OK"]);
    fails(&["convint8", "-n", "1", "-c", "4", "-H", "5", "-W", "5", "-k", "4", "-F", "2"], &[], 1, "int8 convolutions are forward only");
}

#[test]
fn conv_find_immediate_and_solution_choice() {
    // The Direct algorithm's entry is whichever of its solvers Find timed fastest (the
    // taps-direct one where it applies, or the naive one): either may win this small a problem.
    ok(&with(&["conv"], &with(SMALL_CONV, &["-F", "1", "-s", "1"])), &["candidates timed", "algo: miopenConvolutionAlgoDirect", "Chosen Forward Conv. solver: "]);
    // `-S 0` is the driver's immediate-mode flag (its first solution), not a solution id.
    ok(&with(&["conv"], &with(SMALL_CONV, &["-F", "2", "-S", "0"])), &["Backward Data Conv solutions available: ", "name: CpuConvNaive", "Backward Convolution Data Verifies OK"]);
    ok(&with(&["conv"], &with(SMALL_CONV, &["-F", "4", "-S", "CpuConvNaive", "-t", "1"])), &[format!("Solution: {}/CpuConvNaive", solution_id("CpuConvNaive")).as_str(), "Backward Convolution Weights Verifies OK"]);
    // A CUDA solver's id on the CPU.
    let cuda_direct = solution_id("CudaConvDirect").to_string();
    fails(&with(&["conv"], &with(SMALL_CONV, &["-F", "1", "-S", &cuda_direct])), &[], 1, "is for another device");
    fails(&with(&["conv"], &with(SMALL_CONV, &["-F", "1", "-S", "NoSuchSolver"])), &[], 1, "no solver of that name");
}

/// The `Find: step i/n Solver [config] t ms` lines of stderr, as (i, n, solver), checked to
/// number each Find's candidates 1..=n in order.
fn progress_steps(err: &str) -> Vec<(usize, usize, String)> {
    let mut steps = Vec::new();
    for l in err.lines().filter(|l| l.starts_with("Find: ")) {
        let mut f = l.split_whitespace().skip(2);
        let (count, solver) = (f.next().unwrap_or(""), f.next().unwrap_or("").to_string());
        let (i, n) = count.split_once('/').unwrap_or_else(|| panic!("bad progress line: {l}"));
        let (i, n): (usize, usize) = (i.parse().unwrap(), n.parse().unwrap());
        assert!(l.ends_with(" ms") && l.starts_with(&format!("Find: step {i}/{n} {solver}")), "bad progress line: {l}");
        let want = match steps.last() {
            Some(&(j, m, _)) if j < m => (j + 1, m),
            _ => (1, n),
        };
        assert_eq!((i, n), want, "progress out of order at: {l}\n{err}");
        steps.push((i, n, solver));
    }
    steps
}

#[test]
fn find_progress_plain_lines_when_stderr_is_not_a_terminal() {
    // stderr is a pipe here: one plain line per timed solver, none on stdout.
    let o = driver(&with(&["conv"], &with(SMALL_CONV, &["-F", "1", "-s", "1"])));
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let steps = progress_steps(&err);
    assert!(!steps.is_empty() && steps.last().map(|s| s.0 == s.1) == Some(true), "no complete progress:\n{err}");
    assert!(!out.contains("Find: step"), "{out}");
    // The chosen solver is printed afterwards, as before, and was one of those timed.
    let chosen = out.lines().find_map(|l| l.strip_prefix("Chosen Forward Conv. solver: ")).unwrap_or_else(|| panic!("{out}"));
    let name = chosen.split_whitespace().next().unwrap();
    assert!(steps.iter().any(|s| s.2 == name), "{name} not among {steps:?}");
    // Find runs once per direction by default (-S -1), so three runs of steps; a fusion plan
    // compiled in the NORMAL find mode reports its Find too.
    let o = driver(&with(&["conv"], SMALL_CONV));
    assert_eq!(progress_steps(&text(&o).1).iter().filter(|s| s.0 == 1).count(), 3, "{:?}", text(&o));
    let o = driver_env(&["CBAInfer", "-F", "4", "-n", "1", "-c", "4", "-H", "5", "-W", "5", "-k", "4"], &[("MIOPEN_FIND_MODE_FUSION", "NORMAL")]);
    assert!(o.status.success() && !progress_steps(&text(&o).1).is_empty(), "{:?}", text(&o));
    // Immediate mode times nothing.
    let o = driver(&with(&["conv"], &with(SMALL_CONV, &["-F", "1", "-S", "0"])));
    assert!(o.status.success() && progress_steps(&text(&o).1).is_empty(), "{:?}", text(&o));
}

#[test]
fn cbainfer_every_fusion_mode_verifies() {
    let names = ["Convolution+Bias+BatchNorm+Activation", "Convolution+BatchNorm+Activation", "BatchNorm+Activation", "Convolution+BatchNorm", "Convolution+Bias+Activation", "Convolution+Activation", "Convolution+Bias"];
    for (f, name) in names.iter().enumerate() {
        let f = f.to_string();
        let run = format!("Running fusion: {name}");
        ok(&["CBAInfer", "-F", &f, "-n", "2", "-c", "4", "-H", "6", "-W", "6", "-k", "8", "-p", "1", "-q", "1", "-t", "1", "-i", "2"], &[&run, "Forward Activation Verifies on CPU reference", "CPU Fused Kernel Avg Time Elapsed: "]);
    }
}

#[test]
fn cbainfer_half_nhwc_spatial_bn_other_activations_3d() {
    ok(&["CBAInferfp16", "-F", "0", "-n", "2", "-c", "8", "-H", "5", "-W", "5", "-k", "8", "-M", "1", "--layout", "NHWC"], &["Running CPU spatial BN.", "Forward Activation Verifies"]);
    for m in ["1", "2", "8", "9", "100", "101", "102", "103", "104", "105"] {
        ok(&["CBAInfer", "-F", "4", "-n", "1", "-c", "4", "-H", "5", "-W", "5", "-k", "4", "-m", m, "-A", "0.3", "-B", "0.5"], &["Forward Activation Verifies"]);
    }
    ok(&["CBAInfer", "-F", "4", "-n", "1", "-c", "2", "-H", "4", "-W", "4", "-k", "3", "--spatial_dim", "3", "--in_d", "3", "--fil_d", "2", "-g", "1"], &["Forward Activation Verifies"]);
    ok(&["CBAInfer", "-F", "5", "-n", "1", "-c", "4", "-H", "6", "-W", "6", "-k", "4", "-g", "2", "-u", "2", "-v", "2", "-z", "same"], &["Forward Activation Verifies"]);
}

#[test]
fn bnorm_training_inference_backward_verify() {
    let shape = ["-n", "3", "-c", "2", "-H", "4", "-W", "3"];
    ok(&with(&["bnorm", "-F", "1", "-s", "1", "-r", "1", "-m", "1", "-t", "1"], &shape), &["verification passed on running mean", "verification passed on saved inverse variance", "Forward Batch Norm Verifies", "Kernel Avg Time Forward Batch Normalization", "stats: bnormf"]);
    ok(&with(&["bnorm", "-F", "2", "-r", "1"], &shape), &["Forward batch norm verification passed on output", "Forward Batch Norm Verifies"]);
    ok(&with(&["bnorm", "-F", "2", "-D", "2", "-L", "NHWC"], &shape), &["Forward Batch Norm Verifies"]);
    ok(&with(&["bnorm", "-b", "1", "-s", "1", "-t", "1"], &shape), &["passed on dx", "passed on dscale", "passed on dbias", "Backwards Prop Batch Norm Verifies", "stats: bnormb"]);
    ok(&with(&["bnorm", "-F", "1", "-b", "1"], &shape), &["Warning: Deactivate forward to run backward on Batch Norm. Running forward only.", "Forward Batch Norm Verifies"]);
    ok(&with(&["bnormfp16", "-F", "1", "-m", "1", "-s", "1"], &shape), &["Forward Batch Norm Verifies"]);
    ok(&with(&["bnormfp16", "-b", "1"], &shape), &["Backwards Prop Batch Norm Verifies"]);
}

#[test]
fn activ_every_mode_forward_and_backward() {
    // MIOpen's modes and conflux's extension modes (100..105).
    for m in (0..10).chain(100..106) {
        let m = m.to_string();
        ok(&["activ", "-m", &m, "-n", "2", "-c", "3", "-H", "4", "-W", "4", "-A", "0.5", "-B", "0.7", "-G", "1.5"], &["Forward Activation Verifies", "Backward Activation Verifies"]);
    }
    ok(&["activfp16", "-F", "1", "-n", "2", "-c", "3", "-H", "4", "-W", "4", "-t", "1", "--layout", "NHWC"], &["Forward Activation Verifies", "Kernel Avg Time Forward Activation Elapsed", "stats: fwd-activ"]);
    ok(&["activ", "-F", "2", "-n", "2", "-c", "3", "-H", "4", "-W", "4", "-t", "1"], &["Backward Activation Verifies", "stats: bwd-activ"]);
}

#[test]
fn wrong_tolerance_or_injected_fault_fails_with_nonzero_exit() {
    // 16 | 1: the forward result did not verify.
    fails(&["CBAInfer", "-F", "4", "-n", "1", "-c", "4", "-H", "5", "-W", "5", "-k", "4", "--tolerance", "-1"], &[], 17, "Forward Activation FAILED");
    fails(&with(&["conv"], &with(SMALL_CONV, &["-F", "4"])), &[("CONFLUX_DRIVER_FAULT", "1")], 16 | 4, "Backward Convolution Weights FAILED");
    fails(&["activ", "-n", "1", "-c", "2", "-H", "3", "-W", "3"], &[("CONFLUX_DRIVER_FAULT", "1")], 16 | 1 | 2, "Backward Activation FAILED");
    fails(&["bnorm", "-F", "1", "-n", "2", "-c", "2", "-H", "3", "-W", "3"], &[("CONFLUX_DRIVER_FAULT", "1")], 17, "verification FAILED on output");
}

#[test]
fn bad_flags_and_impossible_problems_are_refused_clearly() {
    fails(&["conv", "--bogus", "1"], &[], 2, "unexpected argument '--bogus'");
    fails(&["conv", "-n", "abc"], &[], 2, "invalid value 'abc'");
    fails(&["nosuch"], &[], 2, "unrecognized subcommand");
    fails(&["CBAInfer", "-F", "9"], &[], 1, "Fusion mode out of range.");
    fails(&["CBAInfer", "-M", "2", "-n", "1"], &[], 1, "Incorrect Batch Normalization Mode");
    fails(&["conv", "-n", "1", "-c", "2", "-H", "2", "-W", "2", "-k", "2", "-y", "5", "-x", "5"], &[], 1, "impossible convolution: filter extent 5");
    fails(&["CBAInfer", "-n", "1", "-c", "2", "-H", "2", "-W", "2", "-k", "2", "-y", "5", "-x", "5", "-p", "1"], &[], 1, "exceeds the padded input 4");
    fails(&["conv", "-n", "1", "-c", "3", "-k", "4", "-g", "2"], &[], 1, "Invalid group number");
    fails(&["conv", "-n", "0"], &[], 1, "batchsize must be > 0");
    fails(&["conv", "-n", "1", "--layout", "CHWN"], &[], 1, "unsupported layout");
    fails(&["conv", "-n", "1", "-i", "0"], &[], 1, "Number of iterations must be > 0");
    fails(&["activ", "-m", "12", "-n", "1"], &[], 1, "not an activation mode");
    fails(&["activ", "-m", "106", "-n", "1"], &[], 1, "not an activation mode");
    fails(&["conv", "-n", "1", "--device", "tpu"], &[], 1, "expected cpu, cuda or cuda:N");
}

#[test]
fn bench_prints_the_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("list.txt");
    std::fs::write(&list, "# C-H-W-K-fy-fx-py-px\n8-6-6-8-3-3-1-1\n16-5-5-8-1-1-0-0\n").unwrap();
    let l = list.to_str().unwrap();
    let out = ok(&["bench", l, "-n", "2", "-i", "2", "-V", "1"], &["fused ms", "unfused ms", "speedup", "8-6-6-8-3-3-1-1", "16-5-5-8-1-1-0-0", "geomean speedup"]);
    assert!(out.contains("fused Verifies"), "{out}");
    let o = driver(&["bench", l, "-n", "1", "-i", "1", "--json"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("bench --json is JSON");
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
    assert!(v["rows"][0]["fused_ms"].as_f64().unwrap() > 0.0);
    assert!(v["rows"][0]["fused_min_ms"].as_f64().unwrap() <= v["rows"][0]["fused_ms"].as_f64().unwrap());
    #[cfg(feature = "plot")]
    {
        let svg = dir.path().join("speedup.svg");
        ok(&["bench", l, "-n", "1", "-i", "1", "--plot", svg.to_str().unwrap()], &["chart written to"]);
        let img = std::fs::read_to_string(&svg).expect("chart file");
        assert!(img.starts_with("<svg") && img.contains("8-6-6-8-3-3-1-1") && img.matches("<rect").count() >= 3, "{img}");
    }
    #[cfg(feature = "png")]
    {
        let png = dir.path().join("speedup.png");
        ok(&["bench", l, "-n", "1", "-i", "1", "--plot", png.to_str().unwrap()], &["chart written to"]);
        let img = std::fs::read(&png).expect("chart file");
        assert!(img.starts_with(b"\x89PNG\r\n\x1a\n") && img.len() > 4000, "{} bytes", img.len());
    }
    #[cfg(not(feature = "png"))]
    fails(&["bench", l, "--plot", "chart.png"], &[], 1, "PNG needs conflux-driver built with `--features png`");
    fails(&["bench", l, "--plot", "chart.gif"], &[], 1, "the file name must end in .svg");
    std::fs::write(&list, "8-6-6\n").unwrap();
    fails(&["bench", l], &[], 1, "needs 8 fields C-H-W-K-fy-fx-py-px");
}

#[test]
fn list_solvers_gives_every_solver_with_its_reason() {
    let out = ok(&with(&["conv", "--list-solvers", "-F", "1"], SMALL_CONV), &["Solvers for Forward Conv.", "CpuConvNaive", "applicable", "CudaConvDirect", "not applicable: a Cuda solver"]);
    assert!(out.contains("CpuPointwise") && out.contains("not applicable: "), "{out}");
    ok(&["CBAInfer", "--list-solvers", "-F", "2", "-n", "1"], &["(N+A)", "CpuPointwise", "applicable"]);
    ok(&["bnorm", "--list-solvers", "-b", "1", "-n", "2"], &["Backwards Batch Normalization", "CpuPointwise"]);
    ok(&["activ", "--list-solvers", "-n", "2"], &["Forward Activation", "Backward Activation"]);
}

#[test]
fn json_output_is_one_valid_document() {
    for args in [
        with(&["conv", "--json", "-t", "1", "-i", "2"], SMALL_CONV),
        vec!["CBAInfer", "--json", "-n", "1", "-c", "4", "-H", "5", "-W", "5", "-k", "4", "-t", "1"],
        vec!["bnorm", "--json", "-n", "2", "-c", "2", "-H", "3", "-W", "3", "-F", "1", "-r", "1"],
        vec!["activ", "--json", "-n", "1", "-c", "2", "-H", "3", "-W", "3"],
        with(&["conv", "--json", "--list-solvers"], SMALL_CONV),
    ] {
        let o = driver(&args);
        assert!(o.status.success(), "{args:?}: {:?}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", text(&o).0));
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["device"], "cpu");
        assert!(v["problem"].is_object(), "{v}");
    }
    let o = driver(&["CBAInfer", "--json", "-n", "1", "-c", "4", "-H", "5", "-W", "5", "-k", "4", "--tolerance", "-1"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["verify"][0]["ok"], false);
}

#[test]
fn tf32_flag_sets_the_math_mode_and_the_tolerance() {
    // On the CPU the attribute changes no result; the flag must reach the descriptor (the
    // logged command repeats it) and the verification uses TF32's tolerance for f32.
    for args in [with(&["conv", "--json", "--tf32", "-F", "1"], SMALL_CONV), vec!["CBAInfer", "--json", "--tf32", "-n", "1", "-c", "4", "-H", "5", "-W", "5", "-k", "4"]] {
        let o = driver(&args);
        assert!(o.status.success(), "{args:?}: {:?}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["verify"][0]["tolerance"], conflux::reference::compare::TF32_TOLERANCE, "{v}");
    }
    let o = driver_env(&with(&["conv", "--tf32", "-F", "1"], SMALL_CONV), &[("CONFLUX_LOG", "cmd")]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(format!("{out}{err}").contains("--tf32"), "logged command without --tf32:\n{out}{err}");
}

#[test]
fn logged_commands_replay_through_the_driver() {
    for env in [("CONFLUX_LOG", "cmd"), ("MIOPEN_ENABLE_LOGGING_CMD", "1")] {
        let o = driver_env(&["CBAInfer", "-F", "0", "-n", "1", "-c", "4", "-H", "5", "-W", "5", "-k", "4", "-m", "8", "-M", "1", "--layout", "NHWC", "-V", "0"], &[env]);
        let (_, err) = text(&o);
        let line = err.lines().find(|l| l.starts_with("conflux: Command [CompileFusionPlan] conflux-driver CBAInfer -F 0")).unwrap_or_else(|| panic!("{env:?}: no command logged:\n{err}"));
        let args: Vec<&str> = line.split(" conflux-driver ").nth(1).unwrap().split_whitespace().collect();
        let out = ok(&args, &["Running fusion: Convolution+Bias+BatchNorm+Activation", "Running CPU spatial BN.", "Forward Activation Verifies"]);
        assert!(out.contains("Fused Kernel Avg Time"), "{out}");
    }
    let o = driver_env(&["conv", "-n", "1", "-c", "2", "-H", "5", "-W", "5", "-k", "2", "-m", "trans", "-u", "2", "-v", "2", "-Y", "1", "-X", "1", "-V", "0"], &[("CONFLUX_LOG", "info,cmd")]);
    let (_, err) = text(&o);
    let cmds: Vec<&str> = err.lines().filter(|l| l.starts_with("conflux: Command [")).collect();
    assert_eq!(cmds.len(), 3, "one line per direction:\n{err}");
    let fwd = cmds[0].split(" conflux-driver ").nth(1).unwrap();
    assert!(fwd.starts_with("conv -n 1 -c 2 -H 5 -W 5 -k 2 ") && fwd.contains("-m trans -F 1") && fwd.contains("-Y 1 -X 1"), "{fwd}");
    ok(&fwd.split_whitespace().collect::<Vec<_>>(), &["Forward Convolution Verifies OK"]);
}
