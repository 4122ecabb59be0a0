"""The module `fuse()` puts in place of a Conv2d → BatchNorm2d → (+ residual) → activation
chain. It keeps the original modules, so weights loaded or changed later are used."""

import torch
import torch.nn.functional as F
from torch import nn

from .. import _functional

# PyTorch's own formula of each conflux activation (the eager path of a chain).
EAGER_ACTIVATIONS = {
    "": lambda y, p: y,
    "relu": lambda y, p: F.relu(y),
    "relu6": lambda y, p: F.relu6(y),
    "leaky_relu": lambda y, p: F.leaky_relu(y, p),
    "sigmoid": lambda y, p: torch.sigmoid(y),
    "tanh": lambda y, p: torch.tanh(y),
    "elu": lambda y, p: F.elu(y, p),
    "silu": lambda y, p: F.silu(y),
    "hardswish": lambda y, p: F.hardswish(y),
    "hardsigmoid": lambda y, p: F.hardsigmoid(y),
    "gelu": lambda y, p: F.gelu(y),
    "gelu_tanh": lambda y, p: F.gelu(y, approximate="tanh"),
    "mish": lambda y, p: F.mish(y),
}


class FusedConv2d(nn.Module):
    """act(bn(conv(x)) + residual) as one conflux kernel (eval mode).

    `conv` and `bn` are the original modules (bn may be None); `activation` is a conflux
    activation argument (a name, or (name, parameter)); `residual` says whether forward takes
    the tensor to add before the activation."""

    def __init__(self, conv, bn=None, activation=None, residual=False, chain="", constant_weights=False):
        super().__init__()
        self.constant_weights = constant_weights
        self.conv = conv
        self.bn = bn
        self.activation = activation
        self.residual = residual
        self.chain = chain
        self._act_name, self._act_param = _functional.split_activation(activation)
        # False when fuse(..., example_input=) measured the chain faster in PyTorch.
        self.use_conflux = True
        self._bn_fill = None
        # (input key, bound plan, the parameter tensors it was checked with): calls with the
        # same input spec and the same parameter objects skip every check but the key.
        self._fast = None

    def extra_repr(self):
        return f"chain={self.chain!r}"

    def _bn_tensors(self):
        bn = self.bn
        if bn is None:
            return None
        scale, shift = bn.weight, bn.bias
        if scale is None or shift is None:  # affine=False: fixed ones and zeros, made once
            fill = self._bn_fill
            if fill is None or fill[0].device != bn.running_var.device or fill[0].dtype != bn.running_var.dtype:
                fill = self._bn_fill = (torch.ones_like(bn.running_var), torch.zeros_like(bn.running_mean))
            scale = fill[0] if scale is None else scale
            shift = fill[1] if shift is None else shift
        return bn.running_mean, bn.running_var, scale, shift, float(bn.eps)

    def eager(self, x, residual=None):
        """The chain as PyTorch computes it, with the original modules."""
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        if residual is not None:
            y = y + residual
        return EAGER_ACTIVATIONS[self._act_name](y, self._act_param)

    def _parameters_now(self):
        # Read through the modules' dicts: nn.Module.__getattr__ costs about a microsecond a name.
        mods = self._modules
        cp = mods["conv"]._parameters
        bn = mods.get("bn")
        if bn is None:
            return (cp["weight"], cp["bias"])
        return (cp["weight"], cp["bias"], bn._buffers["running_mean"], bn._buffers["running_var"], bn._parameters["weight"], bn._parameters["bias"])

    def prepare(self, x, residual=None, params=None):
        """Check the chain's arrays and find or compile its plan (without running it); when
        nothing had to be copied, later calls with this input spec take the fast path."""
        params = params or self._parameters_now()
        conv = self.conv
        bn = self._bn_tensors()
        bound, xx, views, res, eps = _functional.prepare(
            x, conv.weight, conv.bias, bn, residual, self.activation, conv.stride, conv.padding, conv.dilation,
            conv.groups, op=f"fused {self.chain}", constant_weights=self.constant_weights,
        )
        if xx is x and views["w"].owner is conv.weight and res is residual:
            self._fast = ((x.shape, x.stride(), x.dtype, x.device), bound, params)
        return bound, xx, views, res, eps, bn

    def forward(self, x, residual=None):
        if not self.use_conflux:
            return self.eager(x, residual)
        params = self._parameters_now()
        w = params[0]
        if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
            conv = self.conv
            m, v, s, t, eps = self._bn_tensors() or (None, None, None, None, 0.0)
            stride, padding, dilation = _functional.conv_geometry(list(x.shape), list(w.shape), conv.stride, conv.padding, conv.dilation)
            return torch.ops.conflux.conv_fused(
                x, w, conv.bias, residual, m, v, s, t, eps, stride, padding, dilation, conv.groups, self._act_name, self._act_param
            )
        fast = self._fast
        if fast is not None:
            key, bound, held = fast
            if (
                key == (x.shape, x.stride(), x.dtype, x.device)
                and all(a is b for a, b in zip(params, held))
                and (residual is None or (residual.shape == bound.out_shape and residual.stride() == bound.out_strides))
            ):
                b = params[1]
                bn_ptrs, eps = None, None
                if len(params) == 6:
                    _, _, mean, var, scale, shift = params
                    if scale is None or shift is None:
                        mean, var, scale, shift, _ = self._bn_tensors()
                    bn_ptrs, eps = (scale.data_ptr(), shift.data_ptr(), mean.data_ptr(), var.data_ptr()), self.bn.eps
                y = torch.empty_strided(bound.out_shape, bound.out_strides, dtype=x.dtype, device=x.device)
                bound.run(x.data_ptr(), y.data_ptr(), w.data_ptr(), b.data_ptr() if b is not None else 0, bn_ptrs,
                          residual.data_ptr() if residual is not None else 0, eps)
                return y
        bound, xx, views, _, eps, _ = self.prepare(x, residual, params)
        return _functional.run_prepared(bound, xx, views, eps, f"fused {self.chain}")
