"""One conflux handle per device, the stream each call queues on, and where GPU scratch
comes from. A CUDA call queues on the caller's current stream (torch's, else cupy's, else
the default stream) and returns without waiting."""

import sys
import threading

from ._conflux import Handle

_handles = {}
_locks = {}
_create_lock = threading.Lock()
_user_allocators = {}


def _torch_allocator(device):
    """Scratch from torch's caching allocator: blocks are uint8 tensors kept alive until the
    library frees them; torch reuses them in stream order on the stream they were made on."""
    import torch

    live = {}

    def alloc(nbytes):
        t = torch.empty(int(nbytes), dtype=torch.uint8, device=device)
        live[t.data_ptr()] = t
        return t.data_ptr()

    def free(ptr):
        live.pop(ptr, None)

    return alloc, free


def handle(device="cpu"):
    """The handle of `device` ("cpu" or "cuda:N"), made on first use."""
    h = _handles.get(device)
    if h is not None:
        return h
    with _create_lock:
        h = _handles.get(device)
        if h is None:
            h = Handle(device)
            if device != "cpu":
                if device in _user_allocators:
                    h.set_allocator(*_user_allocators[device])
                elif "torch" in sys.modules:
                    h.set_allocator(*_torch_allocator(device))
            _locks[device] = threading.Lock()
            _handles[device] = h
    return h


def lock(device):
    """Held while a call sets the handle's stream and queues its work."""
    handle(device)
    return _locks[device]


def set_allocator(device, alloc, free):
    """GPU scratch for `device` from `alloc(nbytes) -> address` and `free(address)`; both None
    gives the library's own stream-ordered pool back. Without a call, torch's caching
    allocator is used when torch is imported."""
    _user_allocators[device] = (alloc, free)
    if device in _handles:
        _handles[device].set_allocator(alloc, free)


def current_stream(device):
    """The raw CUstream the caller is queuing on for `device` ("cuda:N")."""
    index = int(device.split(":")[1])
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the cheap form inductor uses
        return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        with cupy.cuda.Device(index):
            return cupy.cuda.get_current_stream().ptr
    return 0


def queue(device, call):
    """Run `call(handle)` with the device's handle on the caller's current stream, holding the
    lock that keeps another thread from switching the handle's stream in between."""
    h = handle(device)
    with lock(device):
        h.set_stream(current_stream(device) if device != "cpu" else 0)
        call(h)
