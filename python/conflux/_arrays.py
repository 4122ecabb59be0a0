"""Arrays in, addresses out: what the extension needs of a torch tensor, a numpy array or any
DLPack producer (address, MIOpen data type, lengths, strides, device), and new arrays of the
caller's own kind for outputs. No data is copied; torch's and numpy's attributes are read
directly (cheaper than a DLPack round trip per call), anything else goes through __dlpack__.
"""

import sys

import numpy as np

from ._conflux import Error, dlpack_view

# miopenDataType_t values.
HALF, FLOAT, BFLOAT16, DOUBLE = 0, 1, 5, 6

_NUMPY_TYPES = {np.dtype(np.float16): HALF, np.dtype(np.float32): FLOAT, np.dtype(np.float64): DOUBLE}
# DLPack (type code, bits) → miopenDataType_t: code 2 is IEEE float, 4 bfloat.
_DLPACK_TYPES = {(2, 16): HALF, (2, 32): FLOAT, (2, 64): DOUBLE, (4, 16): BFLOAT16}
# DLPack device types: 1 CPU, 2 CUDA, 3 CUDA pinned host memory (a CPU address), 13 CUDA managed.
_DLPACK_CPU, _DLPACK_CUDA, _DLPACK_CUDA_HOST, _DLPACK_CUDA_MANAGED = 1, 2, 3, 13

_TORCH_TYPES = None


def _torch_types():
    global _TORCH_TYPES
    if _TORCH_TYPES is None:
        import torch

        _TORCH_TYPES = {torch.float16: HALF, torch.float32: FLOAT, torch.bfloat16: BFLOAT16, torch.float64: DOUBLE}
    return _TORCH_TYPES


def is_torch(a):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


class View:
    """One array as the extension sees it. `owner` keeps alive whatever owns the memory
    (a DLPack capsule, a contiguous copy) for as long as the view is used."""

    __slots__ = ("ptr", "dtype", "shape", "strides", "device", "owner")

    def __init__(self, ptr, dtype, shape, strides, device, owner):
        self.ptr, self.dtype, self.shape, self.strides, self.device, self.owner = ptr, dtype, shape, strides, device, owner

    def spec(self):
        return (self.dtype, self.shape, self.strides)

    def spec_as(self, shape, strides):
        """The same memory described with other lengths (e.g. a bias of K as 1×K×1×1)."""
        return (self.dtype, list(shape), list(strides))


def _bad(op, what, why):
    return Error(f"miopenStatusBadParm: {op}: {what}: {why}")


def view(a, op, what):
    """The View of `a`, or conflux.Error (BadParm) naming `op` and the argument."""
    if is_torch(a):
        dtype = _torch_types().get(a.dtype)
        if dtype is None:
            raise _bad(op, what, f"data type {a.dtype} is not supported (float16, bfloat16, float32, float64)")
        dev = a.device
        device = "cpu" if dev.type == "cpu" else f"cuda:{dev.index if dev.index is not None else 0}"
        if dev.type not in ("cpu", "cuda"):
            raise _bad(op, what, f"device {dev} is not supported (cpu, cuda)")
        return View(a.data_ptr(), dtype, list(a.shape), list(a.stride()), device, a)
    if isinstance(a, np.ndarray):
        dtype = _NUMPY_TYPES.get(a.dtype)
        if dtype is None:
            raise _bad(op, what, f"data type {a.dtype} is not supported (float16, float32, float64)")
        item = a.itemsize
        if any(s < 0 or s % item for s in a.strides):
            raise _bad(op, what, "negative or unaligned strides (take a copy first)")
        return View(a.ctypes.data, dtype, list(a.shape), [s // item for s in a.strides], "cpu", a)
    if hasattr(a, "__dlpack__"):
        capsule = a.__dlpack__()
        ptr, (code, bits, lanes), shape, strides, (dev_type, dev_id), _ = dlpack_view(capsule)
        dtype = _DLPACK_TYPES.get((code, bits))
        if dtype is None or lanes != 1:
            raise _bad(op, what, f"DLPack data type (code {code}, {bits} bits, {lanes} lanes) is not supported")
        if dev_type in (_DLPACK_CPU, _DLPACK_CUDA_HOST):
            device = "cpu"
        elif dev_type in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
            device = f"cuda:{dev_id}"
        else:
            raise _bad(op, what, f"DLPack device type {dev_type} is not supported (CPU, CUDA)")
        if any(s < 0 for s in strides):
            raise _bad(op, what, "negative strides")
        return View(ptr, dtype, list(shape), list(strides), device, (a, capsule))
    raise _bad(op, what, f"{type(a).__name__} is not an array (torch tensor, numpy array or DLPack producer)")


def channels_last(shape, strides):
    """True when a 4-D/5-D tensor is laid out with channels innermost (NHWC / NDHWC)."""
    if len(shape) not in (4, 5):
        return False
    order = [0] + list(range(2, len(shape))) + [1]
    expect = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != expect:
            return False
        expect *= shape[d]
    return True


def output_channels_last(x_shape, x_strides):
    """Whether conflux lays a convolution's output out channels-last for this input (the
    library's rule: C innermost with C > 1 and W not innermost)."""
    return len(x_shape) >= 3 and x_strides[1] == 1 and x_shape[1] > 1 and x_strides[-1] != 1


def packed_strides(shape, nhwc):
    """Strides of a packed tensor: row-major, or channels-last when `nhwc`."""
    order = [0] + list(range(2, len(shape))) + [1] if nhwc else list(range(len(shape)))
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return strides


def empty_like_kind(template, shape, strides):
    """A new array of `template`'s kind, type and device with these lengths and strides."""
    if is_torch(template):
        import torch

        return torch.empty_strided(shape, strides, dtype=template.dtype, device=template.device)
    if isinstance(template, np.ndarray):
        item = template.itemsize
        span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
        base = np.empty(max(span, 1), dtype=template.dtype)
        return np.lib.stride_tricks.as_strided(base, shape=shape, strides=[s * item for s in strides])
    xp = template.__array_namespace__() if hasattr(template, "__array_namespace__") else None
    if xp is None:
        raise Error(f"miopenStatusBadParm: cannot allocate an output like {type(template).__name__}: it has no __array_namespace__")
    nhwc = channels_last(shape, strides)
    if nhwc:
        phys = [shape[0]] + list(shape[2:]) + [shape[1]]
        perm = [0, len(shape) - 1] + list(range(1, len(shape) - 1))
        return xp.permute_dims(xp.empty(tuple(phys), dtype=template.dtype, device=template.device), tuple(perm))
    return xp.empty(tuple(shape), dtype=template.dtype, device=template.device)


def usable(a):
    """`a` itself when its layout is packed NCHW-like or channels-last, else a packed copy
    (torch and numpy only; other producers must hand over packed arrays)."""
    if is_torch(a):
        import torch

        if a.is_contiguous() or (a.dim() == 4 and a.is_contiguous(memory_format=torch.channels_last)) or (
            a.dim() == 5 and a.is_contiguous(memory_format=torch.channels_last_3d)
        ):
            return a
        return a.contiguous()
    if isinstance(a, np.ndarray) and not a.flags.c_contiguous:
        item = a.itemsize
        if any(s % item for s in a.strides) or not channels_last(list(a.shape), [s // item for s in a.strides]):
            return np.ascontiguousarray(a)
    return a
