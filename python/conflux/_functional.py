"""`conflux.conv2d` and the fused chain behind it: act(bn(conv(x, w) + b) + residual), one
fusion plan per (shapes, types, layouts, chain), compiled once and cached."""

import threading

from . import _arrays, _device
from ._conflux import Error, FusionPlan as _Plan

# name → (miopenActivationMode_t, α, β, γ) with PyTorch's default parameters.
ACTIVATIONS = {
    "relu": (3, 0.0, 0.0, 0.0),
    "relu6": (7, 6.0, 0.0, 0.0),  # CLIPPEDRELU with α = 6
    "leaky_relu": (8, 0.01, 0.0, 0.0),
    "sigmoid": (1, 0.0, 0.0, 0.0),
    "tanh": (2, 1.0, 1.0, 0.0),  # α·tanh(β·x)
    "elu": (9, 1.0, 0.0, 0.0),
    # conflux's extension modes (miopen.h CONFLUX_ACTIVATION_*), PyTorch's formulas.
    "silu": (100, 0.0, 0.0, 0.0),
    "hardswish": (101, 0.0, 0.0, 0.0),
    "hardsigmoid": (102, 0.0, 0.0, 0.0),
    "gelu": (103, 0.0, 0.0, 0.0),  # erf form, F.gelu(approximate="none")
    "gelu_tanh": (104, 0.0, 0.0, 0.0),  # F.gelu(approximate="tanh")
    "mish": (105, 0.0, 0.0, 0.0),
}

_plans = {}
_plans_lock = threading.Lock()


def activation_params(activation):
    """None, a name, or (name, parameter) for leaky_relu's slope / elu's α → mode tuple."""
    if activation is None:
        return None
    name, param = (activation, None) if isinstance(activation, str) else tuple(activation)
    if name not in ACTIVATIONS:
        raise ValueError(f"conflux: unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)} or None")
    mode, a, b, g = ACTIVATIONS[name]
    if param is not None:
        if name not in ("leaky_relu", "elu"):
            raise ValueError(f"conflux: activation {name!r} takes no parameter")
        a = float(param)
    return (mode, a, b, g)


def split_activation(activation):
    """conv2d's activation argument as the custom ops' (name, α): ("", 0.0) for none, and
    the default α (leaky_relu's slope, elu's α) filled in."""
    if activation is None:
        return "", 0.0
    name = activation if isinstance(activation, str) else activation[0]
    return name, activation_params(activation)[1]


def _tuple(v, n, what):
    if isinstance(v, int):
        return [v] * n
    v = [int(e) for e in v]
    if len(v) != n:
        raise ValueError(f"conflux: {what} needs {n} values, got {len(v)}")
    return v


def conv_geometry(x_shape, w_shape, stride, padding, dilation):
    """Per-dimension stride, padding and dilation lists (padding may be 'valid' or 'same')."""
    n = len(x_shape) - 2
    stride = _tuple(stride, n, "stride")
    dilation = _tuple(dilation, n, "dilation")
    if padding == "valid":
        padding = [0] * n
    elif padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError("conflux: padding='same' needs stride 1")
        total = [d * (k - 1) for d, k in zip(dilation, w_shape[2:])]
        if any(t % 2 for t in total):
            raise ValueError("conflux: padding='same' with an even filter extent needs asymmetric padding, which conflux's API does not take")
        padding = [t // 2 for t in total]
    else:
        padding = _tuple(padding, n, "padding")
    return stride, padding, dilation


def per_channel(v, k):
    """A length-K vector as the 1×K×1×1 tensor MIOpen's bias and BN descriptors describe."""
    return v.spec_as([1, k, 1, 1], [k, 1, 1, 1])


def _matching(a, v, shape, strides, op, what):
    """`a` (viewed as `v`) with exactly these strides: itself, or a copy in that layout."""
    if list(v.shape) != list(shape):
        raise Error(f"miopenStatusBadParm: {op}: {what} has lengths {v.shape}, expected {list(shape)}")
    if list(v.strides) == list(strides):
        return a, v
    copy = _arrays.empty_like_kind(a, list(shape), list(strides))
    copy[...] = a
    return copy, _arrays.view(copy, op, what)


class BoundPlan:
    """A compiled fused plan for one set of input specs, and what its calls need besides
    addresses: the caller checks its arrays against the specs once (`prepare`), then `run`s
    with addresses only."""

    __slots__ = ("plan", "device", "out_shape", "out_strides", "act", "eps", "has_b", "has_bn", "has_res", "handle", "lock")

    def __init__(self, plan, device, act, eps, has_b, has_bn, has_res):
        self.plan, self.device, self.act, self.eps = plan, device, act, eps
        self.has_b, self.has_bn, self.has_res = has_b, has_bn, has_res
        _, shape, strides = plan.output_spec()
        self.out_shape, self.out_strides = tuple(shape), tuple(strides)
        self.handle = _device.handle(device)
        self.lock = _device.lock(device)

    def run(self, x_ptr, y_ptr, w_ptr, b_ptr=0, bn_ptrs=None, res_ptr=0, eps=None):
        """Queue the plan on x into y; bn_ptrs = (scale, shift, mean, var)."""
        args = [("conv", w_ptr, 1.0, 0.0)]
        if self.has_b:
            args.append(("bias", b_ptr))
        if self.has_bn:
            args.append(("bn_inference", *bn_ptrs, self.eps if eps is None else eps))
        if self.has_res:
            args.append(("add", res_ptr, 1.0))
        if self.act is not None:
            args.append(("activation", self.act[1], self.act[2], self.act[3]))
        stream = _device.current_stream(self.device) if self.device != "cpu" else 0
        with self.lock:
            self.plan.run(self.handle, stream, x_ptr, y_ptr, args)


def prepare(x, w, b=None, bn=None, residual=None, activation=None, stride=1, padding=0, dilation=1, groups=1, op="conv2d", constant_weights=False):
    """Check the arrays of act(bn(conv(x, w) + b) + residual) and find or compile its plan.
    Returns (bound plan, x, views by name, residual in the output's layout or None)."""
    act = activation_params(activation)
    x = _arrays.usable(x)
    w = _arrays.usable(w)
    xv = _arrays.view(x, op, "x")
    wv = _arrays.view(w, op, "w")
    if len(xv.shape) not in (4, 5) or len(wv.shape) != len(xv.shape):
        raise Error(f"miopenStatusBadParm: {op}: x {xv.shape} and w {wv.shape} must both be 4-D (or both 5-D)")
    stride, padding, dilation = conv_geometry(xv.shape, wv.shape, stride, padding, dilation)
    k = wv.shape[0]
    views = {"x": xv, "w": wv}
    eps = None
    if b is not None:
        views["b"] = _arrays.view(b, op, "b")
    if bn is not None:
        mean, var, scale, shift, eps = bn
        for name, a in (("bn mean", mean), ("bn var", var), ("bn scale", scale), ("bn shift", shift)):
            views[name] = _arrays.view(a, op, name)
    for name, v in views.items():
        if v.device != xv.device:
            raise Error(f"miopenStatusBadParm: {op}: {name} is on {v.device}, x on {xv.device}")
        if name != "x" and name != "w" and (v.shape != [k] or v.strides != [1]):
            raise Error(f"miopenStatusBadParm: {op}: {name} must be a packed vector of {k} values, got lengths {v.shape}")
    device = xv.device
    if residual is not None:
        rv = _arrays.view(residual, op, "residual")
        if rv.device != device:
            raise Error(f"miopenStatusBadParm: {op}: residual is on {rv.device}, x on {device}")
    key = (device, tuple(map(tuple, [xv.shape, xv.strides, wv.shape, wv.strides])), xv.dtype, wv.dtype,
           views["b"].dtype if b is not None else None, views["bn mean"].dtype if bn is not None else None,
           residual is not None, tuple(stride), tuple(padding), tuple(dilation), groups, act, constant_weights)
    bound = _plans.get(key)
    if bound is None:
        plan = _Plan(xv.spec())
        plan.add_conv(wv.spec(), padding, stride, dilation, groups, None, constant_weights)
        if b is not None:
            plan.add_bias(per_channel(views["b"], k))
        if bn is not None:
            plan.add_bn_inference(True, per_channel(views["bn mean"], k))
        if residual is not None:
            plan.add_tensor_add(plan.output_spec())
        if act is not None:
            plan.add_activation(act[0])
        # No lock: compiling does not touch the stream, and plans may compile in parallel.
        plan.compile(_device.handle(device))
        bound = BoundPlan(plan, device, act, None, b is not None, bn is not None, residual is not None)
        with _plans_lock:
            _plans[key] = bound
    if residual is not None:
        residual, views["residual"] = _matching(residual, rv, bound.out_shape, bound.out_strides, op, "residual")
    return bound, x, views, residual, eps


def fused(x, w, b=None, bn=None, residual=None, activation=None, stride=1, padding=0, dilation=1, groups=1, op="conv2d", constant_weights=False):
    """act(bn(conv(x, w) + b) + residual) as one plan. `bn` is (mean, var, scale, shift, eps)
    for inference; every array is of one kind and on one device. `constant_weights`: the
    caller promises w's values never change at its address (frozen inference weights; the
    CPU then keeps its transformed filters). Returns a new array."""
    bound, x, views, _, eps = prepare(x, w, b, bn, residual, activation, stride, padding, dilation, groups, op, constant_weights)
    return run_prepared(bound, x, views, eps, op)


def run_prepared(bound, x, views, eps, op):
    """Queue a chain `prepare` checked (its views by name) into a new output like x."""
    y = _arrays.empty_like_kind(x, bound.out_shape, bound.out_strides)
    yv = _arrays.view(y, op, "y")
    bn_ptrs = tuple(views[n].ptr for n in ("bn scale", "bn shift", "bn mean", "bn var")) if "bn mean" in views else None
    bound.run(views["x"].ptr, yv.ptr, views["w"].ptr, views["b"].ptr if "b" in views else 0, bn_ptrs,
              views["residual"].ptr if "residual" in views else 0, float(eps) if eps is not None else None)
    return y


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, activation=None, residual=None):
    """act(conv2d(x, w) + b + residual) in one fused call.

    x, w, b and residual are torch tensors, numpy arrays or DLPack producers of one kind, on
    one device; the result is a new array of that kind, with x's data type and memory format
    (NCHW or channels-last). `activation`: None, "relu", "relu6", "leaky_relu" (slope 0.01, or
    ("leaky_relu", slope)), "sigmoid", "tanh", "elu" (or ("elu", α)). Torch tensors that
    require grad go through the differentiable op (conflux's backward kernels). Failures
    raise conflux.Error with MIOpen's status and the reason."""
    if _arrays.is_torch(x):
        import torch

        needs_grad = torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in (x, w, b, residual))
        # Under torch.compile the custom op (with its fake kernel) keeps the graph whole.
        if needs_grad or torch.compiler.is_compiling():
            from .torch import _autograd

            return _autograd.conv2d(x, w, b, stride, padding, dilation, groups, activation, residual)
    if hasattr(x, "shape") and len(x.shape) != 4:
        raise Error(f"miopenStatusBadParm: conv2d: x must be 4-D (N, C, H, W), got {len(x.shape)} dimensions")
    return fused(x, w, b=b, residual=residual, activation=activation, stride=stride, padding=padding, dilation=dilation, groups=groups)


def plan_count():
    """How many distinct fused plans this process has compiled (tests, reports)."""
    return len(_plans)
