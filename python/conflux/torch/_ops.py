"""conflux's operations as PyTorch custom ops (`torch.ops.conflux.*`), each with a fake
(meta) kernel so that `torch.compile` and `torch.export` see opaque ops with known output
shapes, and with autograd formulas built from conflux's own backward kernels."""

from typing import List, Optional

import torch

from .. import _arrays, _device, _functional
from .._conflux import Convolution, activation_backward as _act_bwd, activation_forward as _act_fwd, bias_backward as _bias_bwd

Tensor = torch.Tensor


def activation_arg(activation, act_param):
    """The custom ops' (name, parameter) pair back to conflux.conv2d's activation argument."""
    if not activation:
        return None
    return (activation, act_param) if activation in ("leaky_relu", "elu") else activation


def conv_output_shape(x_shape, w_shape, stride, padding, dilation):
    spatial = [
        (n + 2 * p - d * (k - 1) - 1) // s + 1
        for n, k, s, p, d in zip(x_shape[2:], w_shape[2:], stride, padding, dilation)
    ]
    return [x_shape[0], w_shape[0]] + spatial


def _packed(t):
    if t.is_contiguous():
        return True
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return fmt is not None and t.is_contiguous(memory_format=fmt)


def output_like_conflux(x, shape):
    """An empty tensor with the strides conflux gives a convolution output of input x."""
    nhwc = _packed(x) and _arrays.output_channels_last(list(x.shape), list(x.stride()))
    return x.new_empty_strided(shape, _arrays.packed_strides(shape, nhwc))


def _same_layout(g, like):
    """`g` with exactly `like`'s strides (autograd may hand over expanded or permuted grads)."""
    if list(g.stride()) == list(like.stride()):
        return g
    return torch.empty_strided(like.shape, like.stride(), dtype=like.dtype, device=like.device).copy_(g)


# ---- forward: the fused chain --------------------------------------------------------------

@torch.library.custom_op("conflux::conv_fused", mutates_args=())
def conv_fused(
    x: Tensor, w: Tensor, b: Optional[Tensor], residual: Optional[Tensor],
    bn_mean: Optional[Tensor], bn_var: Optional[Tensor], bn_scale: Optional[Tensor], bn_shift: Optional[Tensor], bn_eps: float,
    stride: List[int], padding: List[int], dilation: List[int], groups: int, activation: str, act_param: float,
) -> Tensor:
    """act(bn(conv(x, w) + b) + residual); empty `activation` = none, no BN when bn_mean is None."""
    bn = (bn_mean, bn_var, bn_scale, bn_shift, bn_eps) if bn_mean is not None else None
    return _functional.fused(x, w, b, bn, residual, activation_arg(activation, act_param), stride, padding, dilation, groups, op="conflux::conv_fused")


@conv_fused.register_fake
def _conv_fused_fake(x, w, b, residual, bn_mean, bn_var, bn_scale, bn_shift, bn_eps, stride, padding, dilation, groups, activation, act_param):
    return output_like_conflux(x, conv_output_shape(x.shape, w.shape, stride, padding, dilation))


# ---- activation alone (the training path of modes whose derivative needs the input) -------

@torch.library.custom_op("conflux::activation", mutates_args=())
def activation(x: Tensor, mode: int, alpha: float, beta: float, gamma: float) -> Tensor:
    y = torch.empty_like(x)
    xv = _arrays.view(x, "conflux::activation", "x")
    _device.queue(xv.device, lambda h: _act_fwd(h, mode, alpha, beta, gamma, xv.spec(), xv.ptr, y.data_ptr()))
    return y


@activation.register_fake
def _activation_fake(x, mode, alpha, beta, gamma):
    return torch.empty_like(x)


@torch.library.custom_op("conflux::activation_backward", mutates_args=())
def activation_backward(y: Tensor, dy: Tensor, x: Tensor, mode: int, alpha: float, beta: float, gamma: float) -> Tensor:
    """dx = f'(x, y)·dy; y, dy and x share one layout (dy is restrided to y's)."""
    dy = _same_layout(dy, y)
    x = _same_layout(x, y)
    dx = torch.empty_like(y)
    yv = _arrays.view(y, "conflux::activation_backward", "y")
    _device.queue(yv.device, lambda h: _act_bwd(h, mode, alpha, beta, gamma, yv.spec(), yv.ptr, dy.data_ptr(), x.data_ptr(), dx.data_ptr()))
    return dx


@activation_backward.register_fake
def _activation_backward_fake(y, dy, x, mode, alpha, beta, gamma):
    return torch.empty_like(y)


# ---- backward kernels ----------------------------------------------------------------------

_convolutions = {}


def _convolution(x, w, dy, stride, padding, dilation, groups):
    xv = _arrays.view(x, "conflux backward", "x")
    wv = _arrays.view(w, "conflux backward", "w")
    dv = _arrays.view(dy, "conflux backward", "dy")
    key = (xv.device, tuple(xv.shape), tuple(xv.strides), tuple(wv.shape), tuple(wv.strides), tuple(dv.strides), xv.dtype,
           tuple(stride), tuple(padding), tuple(dilation), groups)
    c = _convolutions.get(key)
    if c is None:
        c = Convolution(xv.spec(), wv.spec(), list(padding), list(stride), list(dilation), groups, None, dv.spec())
        _convolutions[key] = c
    return c, xv.device


def _run(c, device, direction, call):
    """Run one direction with a workspace from the caller's allocator (torch's on CUDA)."""
    ws_bytes = c.workspace_size(_device.handle(device), direction)
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device=device) if ws_bytes else None
    _device.queue(device, lambda h: call(h, ws.data_ptr() if ws is not None else 0, ws_bytes))


@torch.library.custom_op("conflux::conv_backward_data", mutates_args=())
def conv_backward_data(dy: Tensor, w: Tensor, x: Tensor, stride: List[int], padding: List[int], dilation: List[int], groups: int) -> Tensor:
    """dx of a convolution of x (a template for dx's lengths and layout) with w."""
    dx = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    c, device = _convolution(x, w, dy, stride, padding, dilation, groups)
    _run(c, device, "backward_data", lambda h, ws, n: c.backward_data(h, dy.data_ptr(), w.data_ptr(), dx.data_ptr(), 1.0, 0.0, ws, n))
    return dx


@conv_backward_data.register_fake
def _conv_backward_data_fake(dy, w, x, stride, padding, dilation, groups):
    return x.new_empty_strided(x.shape, x.stride())


@torch.library.custom_op("conflux::conv_backward_weights", mutates_args=())
def conv_backward_weights(dy: Tensor, x: Tensor, w: Tensor, stride: List[int], padding: List[int], dilation: List[int], groups: int) -> Tensor:
    """dw (w is a template for its lengths and layout)."""
    dw = torch.empty_strided(w.shape, w.stride(), dtype=w.dtype, device=w.device)
    c, device = _convolution(x, w, dy, stride, padding, dilation, groups)
    _run(c, device, "backward_weights", lambda h, ws, n: c.backward_weights(h, dy.data_ptr(), x.data_ptr(), dw.data_ptr(), 1.0, 0.0, ws, n))
    return dw


@conv_backward_weights.register_fake
def _conv_backward_weights_fake(dy, x, w, stride, padding, dilation, groups):
    return w.new_empty_strided(w.shape, w.stride())


@torch.library.custom_op("conflux::bias_backward", mutates_args=())
def bias_backward(dy: Tensor) -> Tensor:
    """db[k] = Σ over n and space of dy[n, k, ...]."""
    k = dy.shape[1]
    db = torch.empty(k, dtype=dy.dtype, device=dy.device)
    dv = _arrays.view(dy, "conflux::bias_backward", "dy")
    ones = [1] * (dy.dim() - 2)
    db_spec = (dv.dtype, [1, k] + ones, [k, 1] + ones)
    _device.queue(dv.device, lambda h: _bias_bwd(h, dv.spec(), dv.ptr, db_spec, db.data_ptr(), 1.0, 0.0))
    return db


@bias_backward.register_fake
def _bias_backward_fake(dy):
    return dy.new_empty(dy.shape[1])
