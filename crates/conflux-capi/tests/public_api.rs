//! The whole public surface: every function of MIOpen's public header is declared by ours
//! (`tests/miopen_public_functions.txt`; `c_programs.rs` checks that each declared function is
//! exported), and every function conflux does not compute answers NotImplemented with a reason
//! naming it, instead of crashing or being absent.

mod headers;

use std::collections::BTreeSet;
use std::ffi::CStr;
use std::path::PathBuf;
use MIOpen::handle::confluxGetLastErrorMessage;
use MIOpen::not_implemented::{NOT_IMPLEMENTED, NOT_IMPLEMENTED_DESTROYS};

const SUCCESS: i32 = 0;
const NOT_IMPLEMENTED_STATUS: i32 = 6;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// MIOpen's public function names.
fn miopen_public_functions() -> Vec<String> {
    let text = std::fs::read_to_string(crate_dir().join("tests/miopen_public_functions.txt")).unwrap();
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect()
}

/// Names declared by our headers.
fn declared_functions() -> BTreeSet<String> {
    headers::declared_functions().into_iter().collect()
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(confluxGetLastErrorMessage()) }.to_string_lossy().into_owned()
}

#[test]
fn every_public_miopen_function_is_declared() {
    let public = miopen_public_functions();
    assert!(public.len() >= 250, "the list holds only {} names", public.len());
    let declared = declared_functions();
    let missing: Vec<_> = public.iter().filter(|n| !declared.contains(*n)).collect();
    assert!(missing.is_empty(), "declared by MIOpen, not by conflux: {missing:?}");
}

#[test]
fn every_unimplemented_function_refuses_with_its_name() {
    assert!(NOT_IMPLEMENTED.len() + NOT_IMPLEMENTED_DESTROYS.len() > 90);
    let declared = declared_functions();
    for (name, f) in NOT_IMPLEMENTED {
        assert!(declared.contains(*name), "{name} is exported but no header declares it");
        assert_eq!(f(), NOT_IMPLEMENTED_STATUS, "{name}");
        let reason = last_error();
        assert!(reason.starts_with(&format!("{name}: miopenStatusNotImplemented: conflux does not implement")), "{name}: {reason}");
    }
    for (name, destroy) in NOT_IMPLEMENTED_DESTROYS {
        assert!(declared.contains(*name), "{name} is exported but no header declares it");
        assert_eq!(destroy(std::ptr::null_mut()), SUCCESS, "{name}(NULL)");
        let mut not_ours = 0u64;
        assert_eq!(destroy((&mut not_ours as *mut u64).cast()), NOT_IMPLEMENTED_STATUS, "{name}(object)");
        assert_eq!(not_ours, 0, "{name} wrote through the pointer it was given");
        assert!(last_error().starts_with(&format!("{name}: miopenStatusNotImplemented")), "{name}: {}", last_error());
    }
}
