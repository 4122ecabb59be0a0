"""The module `fuse()` puts in place of a Conv2d → BatchNorm2d → (+ residual) → activation
chain. It keeps the original modules, so weights loaded or changed later are used."""

import torch
from torch import nn

from .. import _functional


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

    def extra_repr(self):
        return f"chain={self.chain!r}"

    def _bn_tensors(self):
        bn = self.bn
        if bn is None:
            return None
        scale = bn.weight if bn.weight is not None else torch.ones_like(bn.running_var)
        shift = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_mean)
        return bn.running_mean, bn.running_var, scale, shift, float(bn.eps)

    def forward(self, x, residual=None):
        conv = self.conv
        bn = self._bn_tensors()
        if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (x.requires_grad or conv.weight.requires_grad)):
            m, v, s, t, eps = bn if bn is not None else (None, None, None, None, 0.0)
            stride, padding, dilation = _functional.conv_geometry(list(x.shape), list(conv.weight.shape), conv.stride, conv.padding, conv.dilation)
            return torch.ops.conflux.conv_fused(
                x, conv.weight, conv.bias, residual, m, v, s, t, eps, stride, padding, dilation, conv.groups, self._act_name, self._act_param
            )
        return _functional.fused(
            x, conv.weight, conv.bias, bn, residual, self.activation, conv.stride, conv.padding, conv.dilation, conv.groups,
            op=f"fused {self.chain}", constant_weights=self.constant_weights,
        )

