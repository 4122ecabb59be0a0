"""conflux: fused convolutions (MIOpen's convolution and Fusion APIs) on NVIDIA GPUs and CPUs.

    import conflux
    y = conflux.conv2d(x, w, b, padding=1, activation="relu")   # torch, numpy or DLPack arrays
    model = conflux.torch.fuse(model.eval())                     # Conv→BN→activation chains fused

Errors raise `conflux.Error` (status, status_name, reason). GPU work is queued on the
caller's current stream; calls never wait for the GPU.
"""

from ._conflux import Error, Handle, __version__
from ._device import handle, set_allocator
from ._functional import ACTIVATIONS, conv2d, plan_count
from ._plan import FusionPlan

__all__ = ["Error", "Handle", "FusionPlan", "conv2d", "handle", "set_allocator", "ACTIVATIONS", "plan_count", "__version__"]


def __getattr__(name):
    # `conflux.torch` imports torch: only when asked for.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'conflux' has no attribute {name!r}")
