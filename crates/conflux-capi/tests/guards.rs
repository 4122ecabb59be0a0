//! The guard layer seen from Rust: NULL handles, descriptors and outputs → BadParm, unknown
//! enum values → BadParm, destroy(NULL) succeeds, every failure leaves a thread-local reason,
//! and a panic inside an entry point becomes InternalError instead of unwinding into C.

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};
use MIOpen::activation::*;
use MIOpen::conv::*;
use MIOpen::fusion::*;
use MIOpen::guard::guard;
use MIOpen::handle::*;
use MIOpen::tensor::*;

const SUCCESS: i32 = 0;
const INVALID_VALUE: i32 = 2;
const BAD_PARM: i32 = 3;
const INTERNAL: i32 = 5;

fn last_error() -> String {
    unsafe { CStr::from_ptr(confluxGetLastErrorMessage()) }.to_string_lossy().into_owned()
}

fn cpu_handle() -> MiopenHandle {
    std::env::set_var("CONFLUX_DEVICE", "cpu");
    let mut h = null_mut();
    assert_eq!(unsafe { miopenCreate(&mut h) }, SUCCESS);
    h
}

#[test]
fn null_arguments_are_bad_parm_with_a_reason() {
    unsafe {
        assert_eq!(miopenCreate(null_mut()), BAD_PARM);
        assert!(last_error().contains("miopenCreate"), "{}", last_error());
        assert!(last_error().contains("NULL"), "{}", last_error());
        assert_eq!(miopenSetStream(null_mut(), null_mut()), BAD_PARM);
        assert_eq!(miopenEnableProfiling(null_mut(), true), BAD_PARM);
        assert_eq!(miopenCreateTensorDescriptor(null_mut()), BAD_PARM);
        assert_eq!(miopenSet4dTensorDescriptor(null_mut(), 1, 1, 1, 1, 1), BAD_PARM);
        assert_eq!(miopenGetTensorNumBytes(null_mut(), null_mut()), BAD_PARM);
        assert_eq!(miopenInitConvolutionDescriptor(null_mut(), 0, 0, 0, 1, 1, 1, 1), BAD_PARM);
        assert_eq!(miopenSetActivationDescriptor(null_mut(), 3, 0.0, 0.0, 0.0), BAD_PARM);
        assert_eq!(miopenCompileFusionPlan(null_mut(), null_mut()), BAD_PARM);
        assert_eq!(miopenSetOpArgsBiasForward(null_mut(), null_mut(), null(), null(), null()), BAD_PARM);

        let h = cpu_handle();
        assert_eq!(miopenGetKernelTime(h, null_mut()), BAD_PARM);
        let mut t = null_mut();
        assert_eq!(miopenCreateTensorDescriptor(&mut t), SUCCESS);
        // A descriptor that was never set cannot be used.
        let mut act = null_mut();
        assert_eq!(miopenCreateActivationDescriptor(&mut act), SUCCESS);
        let x = [0f32; 4];
        let mut y = [0f32; 4];
        assert_eq!(
            miopenActivationForward(h, act, null(), t, x.as_ptr() as *const c_void, null(), t, y.as_mut_ptr() as *mut c_void),
            BAD_PARM
        );
        assert!(last_error().contains("has not been set"), "{}", last_error());
        assert_eq!(miopenSetTensorDescriptor(t, 1, 2, null(), null()), INVALID_VALUE);
        assert_eq!(miopenDestroyActivationDescriptor(act), SUCCESS);
        assert_eq!(miopenDestroyTensorDescriptor(t), SUCCESS);
        assert_eq!(miopenDestroy(h), SUCCESS);
    }
}

#[test]
fn unknown_enum_values_are_bad_parm() {
    unsafe {
        let mut t = null_mut();
        assert_eq!(miopenCreateTensorDescriptor(&mut t), SUCCESS);
        for bad in [4, 10, -1, i32::MAX] {
            assert_eq!(miopenSet4dTensorDescriptor(t, bad, 1, 1, 1, 1), BAD_PARM, "data type {bad}");
            assert!(last_error().contains(&bad.to_string()), "{}", last_error());
        }
        let mut c = null_mut();
        assert_eq!(miopenCreateConvolutionDescriptor(&mut c), SUCCESS);
        assert_eq!(miopenInitConvolutionDescriptor(c, 4, 0, 0, 1, 1, 1, 1), BAD_PARM);
        // The deprecated modes are accepted and mapped to Convolution.
        assert_eq!(miopenInitConvolutionDescriptor(c, 3, 0, 0, 1, 1, 1, 1), SUCCESS);
        let mut mode = -1;
        let mut v = 0;
        assert_eq!(miopenGetConvolutionNdDescriptor(c, 0, null_mut(), null_mut(), null_mut(), null_mut(), &mut mode), SUCCESS);
        assert_eq!(mode, 0);
        assert_eq!(miopenGetConvolutionAttribute(c, 3, &mut v), BAD_PARM);
        let mut a = null_mut();
        assert_eq!(miopenCreateActivationDescriptor(&mut a), SUCCESS);
        assert_eq!(miopenSetActivationDescriptor(a, 10, 0.0, 0.0, 0.0), BAD_PARM);
        // conflux's extension modes are 100..=105; the values around them are not modes.
        assert_eq!(miopenSetActivationDescriptor(a, 99, 0.0, 0.0, 0.0), BAD_PARM);
        assert_eq!(miopenSetActivationDescriptor(a, 106, 0.0, 0.0, 0.0), BAD_PARM);
        for m in 100..=105 {
            assert_eq!(miopenSetActivationDescriptor(a, m, 0.0, 0.0, 0.0), SUCCESS, "mode {m}");
        }
        assert_eq!(miopenSet4dTensorDescriptor(t, 1, 1, 2, 3, 3), SUCCESS);
        let mut plan = null_mut();
        assert_eq!(miopenCreateFusionPlan(&mut plan, 2, t), BAD_PARM);
        assert!(plan.is_null(), "nothing is created on failure");
        assert_eq!(miopenDestroyActivationDescriptor(a), SUCCESS);
        assert_eq!(miopenDestroyConvolutionDescriptor(c), SUCCESS);
        assert_eq!(miopenDestroyTensorDescriptor(t), SUCCESS);
    }
}

#[test]
fn destroy_null_succeeds() {
    unsafe {
        assert_eq!(miopenDestroy(null_mut()), SUCCESS);
        assert_eq!(miopenDestroyTensorDescriptor(null_mut()), SUCCESS);
        assert_eq!(miopenDestroyConvolutionDescriptor(null_mut()), SUCCESS);
        assert_eq!(miopenDestroyActivationDescriptor(null_mut()), SUCCESS);
        assert_eq!(miopenDestroyFusionPlan(null_mut()), SUCCESS);
        assert_eq!(miopenDestroyOperatorArgs(null_mut()), SUCCESS);
    }
}

#[test]
fn last_error_is_per_thread_and_kept_across_successes() {
    unsafe {
        assert_eq!(miopenCreate(null_mut()), BAD_PARM);
        let here = last_error();
        assert!(here.starts_with("miopenCreate: miopenStatusBadParm: "), "{here}");
        // Another thread has its own (empty) message.
        let other = std::thread::spawn(last_error).join().unwrap();
        assert_eq!(other, "");
        // A successful call leaves the message alone.
        let mut t = null_mut();
        assert_eq!(miopenCreateTensorDescriptor(&mut t), SUCCESS);
        assert_eq!(last_error(), here);
        assert_eq!(miopenDestroyTensorDescriptor(t), SUCCESS);
    }
}

#[test]
fn panic_becomes_internal_error() {
    let status = guard("confluxTestPanic", || panic!("deliberate"));
    assert_eq!(status, INTERNAL);
    let msg = last_error();
    assert!(msg.contains("confluxTestPanic") && msg.contains("deliberate") && msg.contains("InternalError"), "{msg}");
}

#[test]
fn error_strings_and_version() {
    let name = |s| unsafe { CStr::from_ptr(miopenGetErrorString(s)) }.to_str().unwrap().to_string();
    assert_eq!(name(0), "miopenStatusSuccess");
    assert_eq!(name(3), "miopenStatusBadParm");
    assert_eq!(name(10), "miopenStatusVersionMismatch");
    assert_eq!(name(11), "Unknown error status");
    assert_eq!(name(-1), "Unknown error status");
    let (mut a, mut b, mut c) = (0usize, 0usize, 0usize);
    assert_eq!(unsafe { miopenGetVersion(&mut a, &mut b, &mut c) }, SUCCESS);
    assert_eq!((a, b, c), API_VERSION);
    assert_eq!(unsafe { miopenGetVersion(null_mut(), null_mut(), null_mut()) }, SUCCESS);
}

#[test]
fn fusion_op_handles_and_wrong_kind_args() {
    unsafe {
        let mut t = null_mut();
        assert_eq!(miopenCreateTensorDescriptor(&mut t), SUCCESS);
        assert_eq!(miopenSet4dTensorDescriptor(t, 1, 1, 2, 3, 3), SUCCESS);
        let mut plan = null_mut();
        assert_eq!(miopenCreateFusionPlan(&mut plan, 0, t), SUCCESS);
        let (mut a, mut b) = (null_mut(), null_mut());
        assert_eq!(miopenCreateOpActivationForward(plan, &mut a, 3), SUCCESS);
        assert_eq!(miopenCreateOpBatchNormForward(plan, &mut b, 1, true), SUCCESS);
        let mut got = null_mut();
        assert_eq!(miopenFusionPlanGetOp(plan, 0, &mut got), SUCCESS);
        assert_eq!(got, a, "GetOp returns the handle creation returned");
        let mut args = null_mut();
        assert_eq!(miopenCreateOperatorArgs(&mut args), SUCCESS);
        let p = [0f32; 2];
        let pp = p.as_ptr() as *const c_void;
        assert_eq!(miopenSetOpArgsBiasForward(args, a, null(), null(), pp), BAD_PARM);
        assert!(last_error().contains("op 0 is a activation forward op"), "{}", last_error());
        // runningMeanVariance requested at creation: NULL running pointers are refused.
        assert_eq!(
            miopenSetOpArgsBatchNormForward(args, b, null(), null(), pp, pp, null_mut(), null_mut(), null_mut(), null_mut(), 1.0, 1e-5),
            BAD_PARM
        );
        assert_eq!(miopenDestroyOperatorArgs(args), SUCCESS);
        assert_eq!(miopenDestroyFusionPlan(plan), SUCCESS);
        assert_eq!(miopenDestroyTensorDescriptor(t), SUCCESS);
    }
}

#[test]
fn a_cpu_handle_keeps_the_stream_it_is_given() {
    // HIP programs create every handle with a stream; on the CPU it is kept, not used.
    let fake = 0x1234usize as *mut c_void;
    unsafe {
        std::env::set_var("CONFLUX_DEVICE", "cpu");
        let mut h = null_mut();
        assert_eq!(miopenCreateWithStream(&mut h, fake), SUCCESS, "{}", last_error());
        let mut s = null_mut();
        assert_eq!(miopenGetStream(h, &mut s), SUCCESS);
        assert_eq!(s, fake);
        let mut t = null_mut();
        assert_eq!(miopenCreateTensorDescriptor(&mut t), SUCCESS);
        assert_eq!(miopenSet4dTensorDescriptor(t, 1, 1, 2, 2, 2), SUCCESS);
        let mut a = null_mut();
        assert_eq!(miopenCreateActivationDescriptor(&mut a), SUCCESS);
        assert_eq!(miopenSetActivationDescriptor(a, 3, 0.0, 0.0, 0.0), SUCCESS);
        let x = [-1.0f32, 2.0, -3.0, 4.0, 5.0, -6.0, 7.0, -8.0];
        let mut y = [f32::NAN; 8];
        let (one, zero) = (1.0f32, 0.0f32);
        let st = miopenActivationForward(h, a, &one as *const f32 as *const c_void, t, x.as_ptr() as *const c_void, &zero as *const f32 as *const c_void, t, y.as_mut_ptr() as *mut c_void);
        assert_eq!(st, SUCCESS, "{}", last_error());
        assert_eq!(y, [0.0, 2.0, 0.0, 4.0, 5.0, 0.0, 7.0, 0.0], "the calls run as on a stream-less handle");
        assert_eq!(miopenSetStream(h, null_mut()), SUCCESS);
        assert_eq!(miopenGetStream(h, &mut s), SUCCESS);
        assert!(s.is_null());
        miopenDestroyActivationDescriptor(a);
        miopenDestroyTensorDescriptor(t);
        assert_eq!(miopenDestroy(h), SUCCESS);
    }
}

/// Fuzzer finding (seed 1): lengths whose packed strides pass INT_MAX cannot be read back
/// through `int` arrays; the getter failed after writing the type and the first lengths.
#[test]
fn a_descriptor_getter_that_cannot_answer_writes_nothing() {
    let mut t = null_mut();
    assert_eq!(unsafe { miopenCreateTensorDescriptor(&mut t) }, SUCCESS);
    let lens = [3, i32::MAX, 7, 1 << 20, 3];
    assert_eq!(unsafe { miopenSetTensorDescriptor(t, 1, 5, lens.as_ptr(), null()) }, SUCCESS);
    let (mut dt, mut dims, mut strides) = (-7, [-7i32; 5], [-7i32; 5]);
    assert_eq!(unsafe { miopenGetTensorDescriptor(t, &mut dt, dims.as_mut_ptr(), strides.as_mut_ptr()) }, BAD_PARM);
    assert!(last_error().contains("stride"), "{}", last_error());
    assert_eq!((dt, dims, strides), (-7, [-7; 5], [-7; 5]), "outputs written on failure");
    assert_eq!(unsafe { miopenDestroyTensorDescriptor(t) }, SUCCESS);
}
