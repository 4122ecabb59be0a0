//! C programs under `tests/c/` compiled with the system C compiler against `miopen.h` and
//! linked to the `libMIOpen.so` cargo built for this test run, then run on the CPU backend.
//! Also: the header compiles as strict C99 and as C++, and every function it declares is
//! exported by the library (a generated program takes the address of each one).

mod headers;

use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn include_dir() -> PathBuf {
    crate_dir().join("include")
}

/// The directory holding the `libMIOpen.so` built with this test binary. `cargo test`
/// builds the library target with all its crate types before the tests, into the test
/// binary's own `deps` directory (and copies it one level up).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    for dir in [deps.clone(), deps.parent().unwrap_or(&deps).to_path_buf()] {
        if dir.join("libMIOpen.so").exists() {
            return dir;
        }
    }
    panic!("libMIOpen.so not found next to {} or one level up", exe.display());
}

fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("conflux-capi-c");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

fn cxx() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "c++".into())
}

fn run_checked(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed ({}):\n{text}", out.status);
    text
}

/// Compile `src` (C99, warnings are errors) and link it to libMIOpen with an rpath.
fn build(src: &Path, name: &str) -> PathBuf {
    let lib = lib_dir();
    let exe = out_dir().join(name);
    let mut cmd = Command::new(cc());
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-O1"])
        .arg("-I")
        .arg(include_dir())
        .arg(src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg("-lMIOpen")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lm");
    run_checked(&mut cmd, &format!("compiling {}", src.display()));
    exe
}

/// A command for a built C program. `cargo test` puts its own library directories on
/// LD_LIBRARY_PATH, which outranks the rpath and may hold an older libMIOpen.so from
/// `cargo build`; the program must load the one it was linked against.
fn program(exe: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir());
    // Find records go to a cache of the test run, not the user's.
    cmd.env("CONFLUX_CACHE_DIR", out_dir().join("cache"));
    cmd
}

/// Build and run `tests/c/<name>.c` on the CPU backend.
fn run_c(name: &str) {
    let exe = build(&crate_dir().join("tests/c").join(format!("{name}.c")), name);
    let text = run_checked(program(&exe).env("CONFLUX_DEVICE", "cpu"), name);
    assert!(text.contains(&format!("{name}: ok")), "{name} did not report ok:\n{text}");
}

#[test]
fn c_fusion_cba_example_flow() {
    run_c("fusion_cba");
}

#[test]
fn c_fusion_horizontal_branches_concatenated() {
    run_c("fusion_horizontal");
}

#[test]
fn c_fusion_prologue_before_the_convolution() {
    run_c("fusion_prologue");
}

#[test]
fn c_fusion_conv_then_batch_norm_training() {
    run_c("fusion_conv_bn_training");
}

#[test]
fn c_fusion_cbna_and_na_inference() {
    run_c("fusion_cbna");
}

#[test]
fn c_batchnorm_activation_training_and_backward() {
    run_c("batchnorm_activation");
}

#[test]
fn c_activation_modes_of_modern_networks() {
    run_c("activation_modern");
}

#[test]
fn c_conv_int8_and_fp8_forward() {
    run_c("conv_int8");
}

#[test]
fn c_bad_input_statuses() {
    run_c("bad_input");
}

#[test]
fn c_pooling_and_softmax_forward_backward() {
    run_c("pooling_softmax");
}

#[test]
fn c_abi_layout_and_tensor_helpers() {
    run_c("abi_layout");
}

#[test]
fn c_calls_conflux_does_not_compute_refuse_cleanly() {
    run_c("not_implemented");
}

#[test]
fn c_find2_solution_saved_then_loaded_by_another_process() {
    let name = "find2_save_load";
    let exe = build(&crate_dir().join("tests/c").join(format!("{name}.c")), name);
    let blob = out_dir().join("find2_solution.blob");
    for mode in ["find", "load"] {
        let text = run_checked(program(&exe).env("CONFLUX_DEVICE", "cpu").arg(mode).arg(&blob), &format!("{name} {mode}"));
        assert!(text.contains(&format!("{name}: ok")), "{name} {mode} did not report ok:\n{text}");
    }
}

#[test]
fn every_header_function_is_exported() {
    let names = headers::declared_functions();
    assert!(names.len() >= 100, "only {} declarations found", names.len());
    for group in ["miopenCreate", "miopenOpTensor", "miopenConvolutionForwardImmediate", "miopenActivationBackward",
        "miopenBatchNormalizationBackward_V2", "miopenConvolutionBiasActivationForward", "confluxGetLastErrorMessage",
        "confluxSetFindProgressCallback"] {
        assert!(names.iter().any(|n| n == group), "{group} not declared");
    }
    // Taking each address makes the link fail for any symbol the library does not export.
    let mut src = String::from("#define MIOPEN_BETA_API\n#include <miopen/miopen.h>\n#include <stdio.h>\n");
    src.push_str("typedef void (*fn_t)(void);\nstatic const fn_t table[] = {\n");
    for n in &names {
        src.push_str(&format!("    (fn_t){n},\n"));
    }
    src.push_str("};\nint main(void) {\n    size_t i;\n    for(i = 0; i < sizeof table / sizeof table[0]; i++)\n");
    src.push_str("        if(!table[i]) return 1;\n    printf(\"exports: %d ok\\n\", (int)(sizeof table / sizeof table[0]));\n    return 0;\n}\n");
    let path = out_dir().join("exports.c");
    std::fs::write(&path, src).unwrap();
    let exe = build(&path, "exports");
    let text = run_checked(&mut program(&exe), "exports");
    assert!(text.contains(&format!("exports: {} ok", names.len())), "{text}");
}

#[test]
fn header_compiles_as_c99_and_cxx() {
    let probe = out_dir().join("header_probe.c");
    std::fs::write(&probe, "#include <miopen/miopen.h>\nint probe(void) { return (int)sizeof(miopenConvAlgoPerf_t); }\n").unwrap();
    for beta in ["-UMIOPEN_BETA_API", "-DMIOPEN_BETA_API"] {
        run_checked(
            Command::new(cc()).args(["-std=c99", "-pedantic-errors", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", beta]).arg("-I").arg(include_dir()).arg(&probe),
            "header as C99",
        );
        run_checked(
            Command::new(cxx())
                .args(["-std=c++11", "-pedantic-errors", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", beta, "-x", "c++"])
                .arg("-I")
                .arg(include_dir())
                .arg(&probe),
            "header as C++",
        );
    }
}

#[test]
fn header_takes_hip_streams_of_both_platforms() {
    // hipStream_t as HIP's headers declare it on each platform, then the stream calls in C++
    // (no implicit pointer conversions): both compile against miopen.h unchanged.
    // A third case: AMD's type declared after miopen.h with the platform macro undefined (a
    // program that includes miopen.h first and is compiled without hipcc).
    let platforms = [
        ("-D__HIP_PLATFORM_AMD__", "struct ihipStream_t;\ntypedef struct ihipStream_t* hipStream_t;\n", true),
        ("-D__HIP_PLATFORM_NVIDIA__", "struct CUstream_st;\ntypedef struct CUstream_st* cudaStream_t;\ntypedef cudaStream_t hipStream_t;\n", true),
        ("-U__HIP_PLATFORM_AMD__", "struct ihipStream_t;\ntypedef struct ihipStream_t* hipStream_t;\n", false),
    ];
    for (define, types, types_first) in platforms {
        let probe = out_dir().join("hip_stream_probe.cpp");
        let body = "int probe(miopenHandle_t* h, hipStream_t s) {\n  hipStream_t out = s;\n  miopenCreateWithStream(h, s);\n  miopenSetStream(*h, s);\n  return (int)miopenGetStream(*h, &out);\n}\n";
        let text = if types_first { format!("{types}#include <miopen/miopen.h>\n{body}") } else { format!("#include <miopen/miopen.h>\n{types}{body}") };
        std::fs::write(&probe, text).unwrap();
        run_checked(
            Command::new(cxx()).args(["-std=c++11", "-pedantic-errors", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", define]).arg("-I").arg(include_dir()).arg(&probe),
            &format!("HIP stream types ({define})"),
        );
    }
}

#[test]
fn c_conv_find_forward_bias_and_cba() {
    run_c("conv_find_forward");
}

#[test]
fn c_conv_immediate_mode() {
    run_c("conv_immediate");
}

#[test]
fn c_conv_backward_data_and_weights() {
    run_c("conv_backward");
}

#[test]
fn c_conv_transpose() {
    run_c("conv_transpose");
}
