"""Autograd of conflux's fused convolution: dy → activation backward → bias, residual,
backward-data and backward-weights, every step a conflux kernel (`torch.ops.conflux.*`).

The fused op saves its output y, not the pre-activation: relu, leaky_relu (positive slope),
sigmoid, tanh and elu have derivatives that y alone determines. relu6, a non-positive leaky
slope and the modes of modern networks (silu, hard-swish, hard-sigmoid, gelu, mish) do not,
so there the convolution and the activation run as two ops and the pre-activation is kept,
as PyTorch itself keeps it."""

import torch

from .._functional import activation_params, conv_geometry, split_activation
from .. import _arrays
from . import _ops


_NOT_FROM_Y = {"relu6", "silu", "hardswish", "hardsigmoid", "gelu", "gelu_tanh", "mish"}


def _needs_preactivation(name, act):
    return name in _NOT_FROM_Y or (name == "leaky_relu" and act[1] <= 0.0)


def conv2d(x, w, b, stride, padding, dilation, groups, activation, residual):
    """The differentiable path of conflux.conv2d."""
    act = activation_params(activation)
    x = _arrays.usable(x)
    w = _arrays.usable(w)
    stride, padding, dilation = conv_geometry(list(x.shape), list(w.shape), stride, padding, dilation)
    name, param = split_activation(activation)
    if act is not None and _needs_preactivation(name, act):
        z = torch.ops.conflux.conv_fused(x, w, b, residual, None, None, None, None, 0.0, stride, padding, dilation, groups, "", 0.0)
        return torch.ops.conflux.activation(z, *act)
    return torch.ops.conflux.conv_fused(x, w, b, residual, None, None, None, None, 0.0, stride, padding, dilation, groups, name, param)


def _conv_setup(ctx, inputs, output):
    x, w, b, residual, bn_mean, _, _, _, _, stride, padding, dilation, groups, activation, act_param = inputs
    ctx.geom = (list(stride), list(padding), list(dilation), groups)
    ctx.act = activation_params(_ops.activation_arg(activation, act_param))
    ctx.has_bn = bn_mean is not None
    ctx.save_for_backward(x, w, output)


def _conv_backward(ctx, dy):
    x, w, y = ctx.saved_tensors
    if ctx.has_bn:
        raise NotImplementedError("conflux: gradients through a fused batch-norm inference op are not implemented (fuse() is for eval-mode models)")
    stride, padding, dilation, groups = ctx.geom
    if ctx.act is not None:
        # y stands in for the pre-activation: these modes' derivatives depend on its sign or value only through y.
        dz = torch.ops.conflux.activation_backward(y, dy, y, *ctx.act)
    else:
        dz = _ops._same_layout(dy, y)
    need = ctx.needs_input_grad
    dx = torch.ops.conflux.conv_backward_data(dz, w, x, stride, padding, dilation, groups) if need[0] else None
    dw = torch.ops.conflux.conv_backward_weights(dz, x, w, stride, padding, dilation, groups) if need[1] else None
    db = torch.ops.conflux.bias_backward(dz) if need[2] else None
    dres = dz if need[3] else None
    return (dx, dw, db, dres) + (None,) * 11


def _activation_setup(ctx, inputs, output):
    x, mode, alpha, beta, gamma = inputs
    ctx.params = (mode, alpha, beta, gamma)
    ctx.save_for_backward(x, output)


def _activation_backward(ctx, dy):
    x, y = ctx.saved_tensors
    return (torch.ops.conflux.activation_backward(y, dy, x, *ctx.params), None, None, None, None)


torch.library.register_autograd("conflux::conv_fused", _conv_backward, setup_context=_conv_setup)
torch.library.register_autograd("conflux::activation", _activation_backward, setup_context=_activation_setup)
