//! The f64 reference (oracle) of every operator: naive loops that are obviously right.
//!
//! Every tensor is read and written through its descriptor's strides (`TensorDesc::offset`),
//! so the reference also defines what strided and channels-last tensors mean. Descriptors
//! are taken as the user states them (transpose convolutions included); any dtype is
//! accepted since the data is f64 here. Outputs are overwritten unless a function says it
//! accumulates (`bias_forward` adds to y by definition).

pub mod activation;
pub mod batchnorm;
pub mod bias;
pub mod compare;
pub mod conv;
pub mod fill;
pub mod fused;
pub mod pooling;
pub mod quantized;
pub mod softmax;
pub mod strided;

pub use activation::{activation_backward, activation_forward};
pub use batchnorm::{bn_backward, bn_batch_stats, bn_forward_training, bn_inference};
pub use bias::{bias_backward, bias_forward};
pub use compare::{check, has_non_finite, max_abs_error, rel_l2_error, tolerance, Comparison};
pub use conv::{
    conv_backward_data, conv_backward_data_alpha_beta, conv_backward_weights, conv_backward_weights_alpha_beta, conv_forward,
    conv_forward_alpha_beta,
};
pub use fill::{exact_integer_limit, fill_for, fill_normal, fill_small_int, fill_uniform, poisoned, Fill, SplitMix64};
pub use fused::{bn_bwd_act_backward, conv_bias_act_forward, forward_chain, ChainOp};
pub use pooling::{pooling_backward, pooling_forward};
pub use quantized::{quantize_output, quantized_conv_forward};
pub use softmax::{softmax_backward, softmax_forward};
pub use strided::{check_same_lens, check_slice, dot, gather, offsets, scatter};
