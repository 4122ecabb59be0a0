//! The part of MIOpen's public API that conflux declares but does not compute: recurrent
//! networks, CTC loss, dropout, tensor reductions, the beta operators outside convolution
//! networks' layers, the Graph API, and Find 2.0's attention problems (`miopen_rnn.h`,
//! `miopen_reduce.h`, `miopen_beta_ops.h`, `miopen_graph.h`, `miopen_find2.h`).
//!
//! A program using them must still build, link and get a clear answer: each function is
//! exported under its C name and returns NotImplemented, with a reason naming the function
//! and its area, and writes nothing. Destroying NULL succeeds, as for every other object.
//!
//! The Rust definitions take no parameters (destroy calls take the one pointer they read).
//! Under the C calling conventions conflux builds for (System V x86-64, AAPCS64) the caller
//! places and removes the arguments, so a callee that reads none of them is correct for
//! any argument list, floating-point and by-value ones included.

use crate::guard::{guard, CStatus};
use conflux::{Error, Status};
use std::ffi::c_void;

/// The status and reason of every function here.
fn refuse(function: &'static str, area: &str) -> CStatus {
    guard(function, || {
        Err(Error::new(
            Status::NotImplemented,
            format!("conflux does not implement {area}; the call is declared so that MIOpen programs build and link"),
        ))
    })
}

macro_rules! not_implemented {
    (
        $( $area:literal => { calls: [$($name:ident),* $(,)?], destroys: [$($destroy:ident),* $(,)?] $(,)? } )*
    ) => {
        $(
            $(
                #[no_mangle]
                pub extern "C" fn $name() -> CStatus {
                    refuse(stringify!($name), $area)
                }
            )*
            $(
                /// NULL is a no-op; anything else cannot have come from this library.
                #[no_mangle]
                pub extern "C" fn $destroy(object: *mut c_void) -> CStatus {
                    if object.is_null() {
                        Status::Success as CStatus
                    } else {
                        refuse(stringify!($destroy), $area)
                    }
                }
            )*
        )*

        /// Every function that always refuses, by name (the tests call each one).
        pub static NOT_IMPLEMENTED: &[(&str, extern "C" fn() -> CStatus)] = &[$($((stringify!($name), $name),)*)*];

        /// Every destroy call here, by name (NULL succeeds, anything else refuses).
        pub static NOT_IMPLEMENTED_DESTROYS: &[(&str, extern "C" fn(*mut c_void) -> CStatus)] =
            &[$($((stringify!($destroy), $destroy),)*)*];
    };
}

not_implemented! {
    "sequence tensors (they serve only the RNN calls)" => {
        calls: [miopenCreateSeqTensorDescriptor],
        destroys: [miopenDestroySeqTensorDescriptor],
    }
    "recurrent networks (RNN, LSTM, GRU)" => {
        calls: [
            miopenCreateRNNDescriptor, miopenGetRNNDescriptor, miopenGetRNNDescriptor_V2,
            miopenSetRNNDescriptor, miopenSetRNNDescriptor_V2, miopenSetRNNDataSeqTensorDescriptor,
            miopenGetRNNDataSeqTensorDescriptor, miopenGetRNNWorkspaceSize, miopenGetRNNTrainingReserveSize,
            miopenGetRNNTempSpaceSizes, miopenGetRNNParamsSize, miopenGetRNNParamsDescriptor,
            miopenGetRNNInputTensorSize, miopenGetRNNHiddenTensorSize, miopenGetRNNLayerParamSize,
            miopenGetRNNLayerBiasSize, miopenGetRNNLayerParam, miopenGetRNNLayerBias,
            miopenGetRNNLayerParamOffset, miopenGetRNNLayerBiasOffset, miopenSetRNNLayerParam,
            miopenSetRNNLayerBias, miopenSetRNNPaddingMode, miopenGetRNNPaddingMode, miopenRNNForward,
            miopenRNNBackwardSeqData, miopenRNNBackwardWeightsSeqTensor, miopenRNNForwardTraining,
            miopenRNNBackwardData, miopenRNNBackwardWeights, miopenRNNForwardInference,
        ],
        destroys: [miopenDestroyRNNDescriptor],
    }
    "the CTC loss" => {
        calls: [miopenCreateCTCLossDescriptor, miopenGetCTCLossDescriptor, miopenSetCTCLossDescriptor,
            miopenGetCTCLossWorkspaceSize, miopenCTCLoss],
        destroys: [miopenDestroyCTCLossDescriptor],
    }
    "dropout" => {
        calls: [miopenCreateDropoutDescriptor, miopenDropoutGetReserveSpaceSize, miopenDropoutGetStatesSize,
            miopenGetDropoutDescriptor, miopenRestoreDropoutDescriptor, miopenSetDropoutDescriptor,
            miopenDropoutForward, miopenDropoutBackward],
        destroys: [miopenDestroyDropoutDescriptor],
    }
    "tensor reductions" => {
        calls: [miopenCreateReduceTensorDescriptor, miopenSetReduceTensorDescriptor, miopenGetReduceTensorDescriptor,
            miopenGetReductionIndicesSize, miopenGetReductionWorkspaceSize, miopenReduceTensor,
            miopenGetReduceCalculationWorkspaceSize, miopenReduceCalculationForward, miopenReduceExtremeForward],
        destroys: [miopenDestroyReduceTensorDescriptor],
    }
    "layer, group and T5 normalizations" => {
        calls: [miopenLayerNormForward, miopenGroupNormForward, miopenAddLayerNormForward, miopenT5LayerNormForward,
            miopenGetT5LayerNormBackwardWorkspaceSize, miopenT5LayerNormBackward],
        destroys: [],
    }
    "MIOpen's beta tensor operators (cat, GLU, getitem, RoPE, k-th value, PReLU)" => {
        calls: [miopenCatForward, miopenGLUForward, miopenGLUBackward, miopenGetGetitemWorkspaceSize,
            miopenGetitemBackward, miopenRoPEForward, miopenRoPEBackward, miopenKthvalueForward,
            miopenGetPReLUBackwardWorkspaceSize, miopenPReLUBackward],
        destroys: [],
    }
    "optimizers (Adam, AdamW)" => {
        calls: [miopenFusedAdam, miopenFusedAdamWithOutput, miopenTransformersAdamW, miopenTransformersAdamWWithOutput],
        destroys: [],
    }
    "loss functions" => {
        calls: [miopenGetSoftMarginLossForwardWorkspaceSize, miopenSoftMarginLossForward, miopenSoftMarginLossBackward,
            miopenGetMultiMarginLossForwardWorkspaceSize, miopenMultiMarginLossForward],
        destroys: [],
    }
    "the Graph API (backend descriptors)" => {
        calls: [miopenBackendCreateDescriptor, miopenBackendSetAttribute, miopenBackendFinalize,
            miopenBackendGetAttribute, miopenBackendExecute, miopenBackendInitialize],
        destroys: [miopenBackendDestroyDescriptor],
    }
    "multi-head attention (Find 2.0 attention problems)" => {
        calls: [miopenCreateMhaProblem, miopenCreateMhaDescriptor, miopenSetMhaDescriptor, miopenGetMhaDescriptor],
        destroys: [],
    }
}
