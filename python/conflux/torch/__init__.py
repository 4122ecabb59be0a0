"""conflux for PyTorch: `fuse(model)`, the fused module, and conflux's operations registered
as `torch.ops.conflux.*` custom ops (with fake kernels for torch.compile / torch.export and
autograd through conflux's backward kernels)."""

from . import _ops  # registers torch.ops.conflux.*
from . import _autograd  # registers their autograd formulas
from ._fuse import fuse
from ._modules import FusedConv2d

__all__ = ["fuse", "FusedConv2d"]
