#!/usr/bin/env python3
"""Smoke test of libMIOpen.so's C ABI (conflux-capi) through ctypes.

GPU mode (default; needs PyTorch with CUDA): every tensor and workspace is a torch CUDA
tensor whose device pointer goes straight into the C calls; the handle is created with
miopenCreateWithStream on torch's current stream (a side stream by default, so that a
library queueing on the wrong stream races with torch's reads). Results are read back on
that stream without synchronizing and compared with PyTorch in float64.

CPU mode (--cpu; no torch, no numpy): the same checks with host buffers (ctypes arrays),
CONFLUX_DEVICE=cpu, a NULL stream and plain-Python float64 references on tiny shapes. It
proves the ctypes signatures and the flows on a machine without a GPU.

Checks: (1) fusion conv+bias+ReLU plan, f32 NCHW and f16 NHWC, compiled once and executed
twice with new data and weights; (2) Find forward + miopenConvolutionForward (alpha/beta);
(3) immediate mode, every listed solution, forward / backward data / backward weights;
(4) Find + run backward data and backward weights; (5) miopenConvolutionBiasActivationForward
with a residual; (6) BN inference + activation fusion plans (alone and after conv + bias);
(7) profiling: miopenGetKernelTime > 0 after a run (CPU: >= 0); (GPU) miopenSetAllocator:
scratch taken from and given back to torch memory; (8) error path: NULL
pointers give miopenStatusBadParm (3) and a reason from confluxGetLastErrorMessage().
Tolerances (relative L2 against float64): f32 1e-5, f16 1e-2.

Prints one OK/FAIL line per check and exits 1 on any failure.

Usage (repository root of the GPU machine, after scripts/gpu/build.sh staged .gpu/):
    python3 scripts/gpu/capi_smoke.py            # or python3 .gpu/capi_smoke.py
    python3 scripts/gpu/capi_smoke.py --lib path/to/libMIOpen.so --default-stream --small
    CONFLUX_DEVICE=cpu python3 scripts/gpu/capi_smoke.py --cpu --lib target/release/libMIOpen.so
"""
import argparse
import ctypes
import faulthandler
import itertools
import math
import os
import random
import struct
import sys
import traceback
from ctypes import POINTER, c_bool, c_char_p, c_double, c_float, c_int, c_size_t, c_uint64, c_void_p

# ======================================================================================
# Bindings: every signature, enum value and struct layout from include/miopen/miopen.h.
# ======================================================================================

# miopenStatus_t
STATUS_NAMES = {
    0: "miopenStatusSuccess", 1: "miopenStatusNotInitialized", 2: "miopenStatusInvalidValue",
    3: "miopenStatusBadParm", 4: "miopenStatusAllocFailed", 5: "miopenStatusInternalError",
    6: "miopenStatusNotImplemented", 7: "miopenStatusUnknownError", 8: "miopenStatusUnsupportedOp",
    9: "miopenStatusGpuOperationsSkipped", 10: "miopenStatusVersionMismatch",
}
SUCCESS, BAD_PARM, UNSUPPORTED_OP = 0, 3, 8
# miopenDataType_t
MIOPEN_HALF, MIOPEN_FLOAT = 0, 1
# miopenTensorLayout_t
LAYOUT_ENUM = {"NCHW": 0, "NHWC": 1}
# miopenConvolutionMode_t
MIOPEN_CONVOLUTION = 0
# miopenConvFwdAlgorithm_t (ConvBwdData / ConvBwdWeights / ConvAlgorithm share the values)
FWD_ALGOS = {0: "GEMM", 1: "Direct", 2: "FFT", 3: "Winograd", 5: "ImplicitGEMM"}
# miopenActivationMode_t
ACT_RELU, ACT_LEAKYRELU = 3, 8
# miopenBatchNormMode_t
BN_SPATIAL = 1
# miopenFusionDirection_t
VERTICAL_FUSION = 0

Status = c_int  # every enum is passed as an int
H = c_void_p    # opaque object pointers (handle, descriptors, plans, ops, args)
P = c_void_p    # data pointers (device pointers on CUDA, host pointers on the CPU) and scalars
PH = POINTER(c_void_p)  # out-parameter for an opaque object
PI = POINTER(c_int)
PZ = POINTER(c_size_t)


class ConvAlgoPerf(ctypes.Structure):
    """miopenConvAlgoPerf_t: 16 bytes (algorithm union at 0, time at 4, memory at 8)."""
    _fields_ = [("algo", c_int), ("time", c_float), ("memory", c_size_t)]


class ConvSolution(ctypes.Structure):
    """miopenConvSolution_t: 32 bytes (time 0, workspace_size 8, solution_id 16, algorithm 24)."""
    _fields_ = [("time", c_float), ("workspace_size", c_size_t), ("solution_id", c_uint64), ("algorithm", c_int)]


assert ctypes.sizeof(ConvAlgoPerf) == 16 and ConvAlgoPerf.memory.offset == 8
assert ctypes.sizeof(ConvSolution) == 32 and ConvSolution.solution_id.offset == 16 and ConvSolution.algorithm.offset == 24

SIGNATURES = {
    "miopenGetErrorString": (c_char_p, [Status]),
    "confluxGetLastErrorMessage": (c_char_p, []),
    "miopenGetVersion": (Status, [PZ, PZ, PZ]),
    # handle
    "miopenCreateWithStream": (Status, [PH, c_void_p]),
    "miopenDestroy": (Status, [H]),
    "miopenGetStream": (Status, [H, PH]),
    "miopenEnableProfiling": (Status, [H, c_bool]),
    "miopenGetKernelTime": (Status, [H, POINTER(c_float)]),
    # tensor descriptors
    "miopenCreateTensorDescriptor": (Status, [PH]),
    "miopenSet4dTensorDescriptor": (Status, [H, c_int, c_int, c_int, c_int, c_int]),
    "miopenSetNdTensorDescriptorWithLayout": (Status, [H, c_int, c_int, PI, c_int]),
    "miopenGetTensorDescriptorSize": (Status, [H, PI]),
    "miopenGetTensorDescriptor": (Status, [H, PI, PI, PI]),
    "miopenDestroyTensorDescriptor": (Status, [H]),
    "miopenDeriveBNTensorDescriptor": (Status, [H, H, c_int]),
    # convolution descriptor
    "miopenCreateConvolutionDescriptor": (Status, [PH]),
    "miopenInitConvolutionDescriptor": (Status, [H, c_int, c_int, c_int, c_int, c_int, c_int, c_int]),
    "miopenGetConvolutionForwardOutputDim": (Status, [H, H, H, PI, PI, PI, PI]),
    "miopenDestroyConvolutionDescriptor": (Status, [H]),
    # activation descriptor
    "miopenCreateActivationDescriptor": (Status, [PH]),
    "miopenSetActivationDescriptor": (Status, [H, c_int, c_double, c_double, c_double]),
    "miopenDestroyActivationDescriptor": (Status, [H]),
    # find mode
    "miopenConvolutionForwardGetWorkSpaceSize": (Status, [H, H, H, H, H, PZ]),
    "miopenFindConvolutionForwardAlgorithm": (
        Status, [H, H, P, H, P, H, H, P, c_int, PI, POINTER(ConvAlgoPerf), P, c_size_t, c_bool]),
    "miopenConvolutionForward": (Status, [H, P, H, P, H, P, H, c_int, P, H, P, P, c_size_t]),
    "miopenSetAllocator": (Status, [H, c_void_p, c_void_p, P]),
    "miopenConvolutionBackwardDataGetWorkSpaceSize": (Status, [H, H, H, H, H, PZ]),
    "miopenFindConvolutionBackwardDataAlgorithm": (
        Status, [H, H, P, H, P, H, H, P, c_int, PI, POINTER(ConvAlgoPerf), P, c_size_t, c_bool]),
    "miopenConvolutionBackwardData": (Status, [H, P, H, P, H, P, H, c_int, P, H, P, P, c_size_t]),
    "miopenConvolutionBackwardWeightsGetWorkSpaceSize": (Status, [H, H, H, H, H, PZ]),
    "miopenFindConvolutionBackwardWeightsAlgorithm": (
        Status, [H, H, P, H, P, H, H, P, c_int, PI, POINTER(ConvAlgoPerf), P, c_size_t, c_bool]),
    "miopenConvolutionBackwardWeights": (Status, [H, P, H, P, H, P, H, c_int, P, H, P, P, c_size_t]),
    "miopenConvolutionBiasActivationForward": (
        Status, [H, P, H, P, H, P, H, c_int, P, c_size_t, P, H, P, H, P, H, H, P]),
    # fusion
    "miopenCreateFusionPlan": (Status, [PH, c_int, H]),
    "miopenDestroyFusionPlan": (Status, [H]),
    "miopenCompileFusionPlan": (Status, [H, H]),
    "miopenFusionPlanGetOp": (Status, [H, c_int, PH]),
    "miopenCreateOpConvForward": (Status, [H, PH, H, H]),
    "miopenCreateOpBiasForward": (Status, [H, PH, H]),
    "miopenCreateOpActivationForward": (Status, [H, PH, c_int]),
    "miopenCreateOpBatchNormInference": (Status, [H, PH, c_int, H]),
    "miopenCreateOperatorArgs": (Status, [PH]),
    "miopenDestroyOperatorArgs": (Status, [H]),
    "miopenSetOpArgsConvForward": (Status, [H, H, P, P, P]),
    "miopenSetOpArgsActivForward": (Status, [H, H, P, P, c_double, c_double, c_double]),
    "miopenSetOpArgsBiasForward": (Status, [H, H, P, P, P]),
    "miopenSetOpArgsBatchNormInference": (Status, [H, H, P, P, P, P, P, P, c_double]),
    "miopenExecuteFusionPlan": (Status, [H, H, H, P, H, P, H]),
}
_SOLUTION_CALLS = {  # immediate mode, per direction: four descriptors, then the rest
    "Forward": None, "BackwardData": None, "BackwardWeights": None,
}
for _d in _SOLUTION_CALLS:
    SIGNATURES[f"miopenConvolution{_d}GetSolutionCount"] = (Status, [H, H, H, H, H, PZ])
    SIGNATURES[f"miopenConvolution{_d}GetSolution"] = (Status, [H, H, H, H, H, c_size_t, PZ, POINTER(ConvSolution)])
    SIGNATURES[f"miopenConvolution{_d}GetSolutionWorkspaceSize"] = (Status, [H, H, H, H, H, c_uint64, PZ])
    SIGNATURES[f"miopenConvolution{_d}CompileSolution"] = (Status, [H, H, H, H, H, c_uint64])
    SIGNATURES[f"miopenConvolution{_d}Immediate"] = (Status, [H, H, P, H, P, H, H, P, P, c_size_t, c_uint64])

LIB = None


class MiopenError(Exception):
    def __init__(self, fn, status, reason):
        self.status = status
        super().__init__(f"{fn} -> {STATUS_NAMES.get(status, status)}: {reason}")


def load(path):
    global LIB
    LIB = ctypes.CDLL(path)
    for name, (res, args) in SIGNATURES.items():
        f = getattr(LIB, name)
        f.restype, f.argtypes = res, args


def last_error():
    s = LIB.confluxGetLastErrorMessage()
    return s.decode(errors="replace") if s is not None else None


def raw(fn, *args):
    """Call and return the status (for calls expected to fail)."""
    return getattr(LIB, fn)(*args)


def call(fn, *args):
    st = getattr(LIB, fn)(*args)
    if st != SUCCESS:
        raise MiopenError(fn, st, last_error())


OUT = object()  # marks where out_handle's output pointer goes (default: first)


def out_handle(fn, *args):
    """Call a creator and return the object it writes through its output pointer."""
    h = c_void_p()
    args = list(args) if OUT in args else [OUT] + list(args)
    call(fn, *[ctypes.byref(h) if a is OUT else a for a in args])
    return h


def f32(v):
    """A host float scalar (alpha / beta); the caller keeps it alive for the call."""
    return ctypes.byref(c_float(v))


def ptr(p):
    return c_void_p(p) if p else None


class Created:
    """Objects to destroy at the end (destroy function, handle)."""
    items = []

    @classmethod
    def add(cls, destroy, h):
        cls.items.append((destroy, h))
        return h

    @classmethod
    def destroy_all(cls):
        for destroy, h in reversed(cls.items):
            call(destroy, h)
        cls.items = []


def tensor_desc(dtype, lens, layout="NCHW"):
    d = Created.add("miopenDestroyTensorDescriptor", out_handle("miopenCreateTensorDescriptor"))
    if layout == "NCHW":
        call("miopenSet4dTensorDescriptor", d, DTYPE_ENUM[dtype], *lens)
    else:
        arr = (c_int * len(lens))(*lens)
        call("miopenSetNdTensorDescriptorWithLayout", d, DTYPE_ENUM[dtype], LAYOUT_ENUM[layout], arr, len(lens))
    return d


def desc_strides(d):
    n = c_int()
    call("miopenGetTensorDescriptorSize", d, ctypes.byref(n))
    dt, dims, strides = c_int(), (c_int * n.value)(), (c_int * n.value)()
    call("miopenGetTensorDescriptor", d, ctypes.byref(dt), dims, strides)
    return list(dims), list(strides)


def conv_desc(pad, stride, dil):
    c = Created.add("miopenDestroyConvolutionDescriptor", out_handle("miopenCreateConvolutionDescriptor"))
    call("miopenInitConvolutionDescriptor", c, MIOPEN_CONVOLUTION, pad, pad, stride, stride, dil, dil)
    return c


DTYPE_ENUM = {"f32": MIOPEN_FLOAT, "f16": MIOPEN_HALF}
TOL = {"f32": 1e-5, "f16": 1e-2}

# ======================================================================================
# Array backends: torch CUDA tensors (GPU) or ctypes host buffers with plain-Python
# float64 references (CPU). Both expose the same methods; references are "logical" NCHW
# float64 values supporting + - * / with broadcasting of 1 x C x 1 x 1 parameters.
# ======================================================================================


class TorchBackend:
    name = "cuda"

    def __init__(self, seed):
        import torch
        import torch.nn.functional as F
        self.torch, self.F = torch, F
        self.dev = torch.device("cuda", torch.cuda.current_device())
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(seed)
        self.tdtype = {"f32": torch.float32, "f16": torch.float16}

    def stream(self):
        return self.torch.cuda.current_stream().cuda_stream

    def _fmt(self, t, layout):
        return t.contiguous(memory_format=self.torch.channels_last) if layout == "NHWC" else t.contiguous()

    def rand(self, shape, dtype="f32", layout="NCHW", positive=False):
        t = self.torch.randn(shape, generator=self.gen, device=self.dev, dtype=self.torch.float32)
        if positive:
            t = t.abs() + 0.5
        return self._fmt(t.to(self.tdtype[dtype]), layout)

    def empty(self, shape, dtype="f32", layout="NCHW"):
        # NaN-filled: an output the library fails to write cannot pass.
        return self._fmt(self.torch.full(shape, float("nan"), device=self.dev, dtype=self.tdtype[dtype]), layout)

    def workspace(self, nbytes):
        return self.torch.empty(max(int(nbytes), 1), dtype=self.torch.uint8, device=self.dev)

    def ptr(self, t):
        return t.data_ptr()

    def strides(self, t):
        return list(t.stride())

    def ref(self, t):
        return t.double()

    def sync(self):
        self.torch.cuda.current_stream().synchronize()

    def rel_l2(self, got, want):
        g = got.double()
        return float(self.torch.linalg.vector_norm(g - want) / self.torch.linalg.vector_norm(want))

    # float64 reference ops
    def conv(self, x, w, pad, stride, dil):
        return self.F.conv2d(x, w, padding=pad, stride=stride, dilation=dil)

    def conv_bwd_data(self, dy, w, x_shape, pad, stride, dil):
        return self.torch.nn.grad.conv2d_input(list(x_shape), w, dy, stride=stride, padding=pad, dilation=dil)

    def conv_bwd_weights(self, x, dy, w_shape, pad, stride, dil):
        return self.torch.nn.grad.conv2d_weight(x, list(w_shape), dy, stride=stride, padding=pad, dilation=dil)

    def relu(self, t):
        return self.torch.relu(t)

    def leaky(self, t, slope):
        return self.torch.where(t > 0, t, slope * t)

    def sqrt(self, t):
        return self.torch.sqrt(t)


class PyRef:
    """A float64 NCHW tensor as a flat list (CPU mode's reference values)."""

    def __init__(self, shape, data):
        self.shape, self.data = tuple(shape), list(data)
        assert len(self.data) == prod(self.shape)

    def _strides(self):
        s, acc = [], 1
        for d in reversed(self.shape):
            s.append(acc if d > 1 else 0)  # 0: broadcast dimension
            acc *= d
        return list(reversed(s))

    def _bin(self, o, f):
        if not isinstance(o, PyRef):
            return PyRef(self.shape, [f(a, o) for a in self.data])
        if o.shape == self.shape:
            return PyRef(self.shape, [f(a, b) for a, b in zip(self.data, o.data)])
        shape = tuple(max(a, b) for a, b in zip(self.shape, o.shape))
        sa, sb = self._strides(), o._strides()
        out = []
        for idx in itertools.product(*map(range, shape)):
            out.append(f(self.data[sum(i * s for i, s in zip(idx, sa))], o.data[sum(i * s for i, s in zip(idx, sb))]))
        return PyRef(shape, out)

    def __add__(self, o): return self._bin(o, lambda a, b: a + b)
    def __radd__(self, o): return self._bin(o, lambda a, b: b + a)
    def __sub__(self, o): return self._bin(o, lambda a, b: a - b)
    def __mul__(self, o): return self._bin(o, lambda a, b: a * b)
    def __rmul__(self, o): return self._bin(o, lambda a, b: b * a)
    def __truediv__(self, o): return self._bin(o, lambda a, b: a / b)


def prod(xs):
    r = 1
    for x in xs:
        r *= x
    return r


class HostTensor:
    """A host buffer in the physical layout (NCHW or NHWC) of f32 or f16 values."""

    def __init__(self, shape, dtype, layout, values):
        self.shape, self.dtype, self.layout = tuple(shape), dtype, layout
        n = prod(shape)
        self.buf = (ctypes.c_float * n)() if dtype == "f32" else (ctypes.c_uint16 * n)()
        self.set(values)

    def _order(self):
        """Physical position of each logical (NCHW) index."""
        N, C, Hh, W = self.shape
        if self.layout == "NCHW":
            return range(N * C * Hh * W)
        return [((n * Hh + h) * W + w) * C + c for n in range(N) for c in range(C) for h in range(Hh) for w in range(W)]

    def strides(self):
        N, C, Hh, W = self.shape
        return [C * Hh * W, Hh * W, W, 1] if self.layout == "NCHW" else [Hh * W * C, 1, W * C, C]

    def set(self, values):
        for v, p in zip(values, self._order()):
            self.buf[p] = v if self.dtype == "f32" else struct.unpack("<H", struct.pack("<e", v))[0]

    def values(self):
        if self.dtype == "f32":
            phys = list(self.buf)
        else:
            phys = [struct.unpack("<e", struct.pack("<H", u))[0] for u in self.buf]
        return [phys[p] for p in self._order()]


class PyBackend:
    name = "cpu"

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def stream(self):
        return None  # a CPU handle accepts only the NULL stream

    def _round(self, v, dtype):
        return struct.unpack("<f" if dtype == "f32" else "<e", struct.pack("<f" if dtype == "f32" else "<e", v))[0]

    def rand(self, shape, dtype="f32", layout="NCHW", positive=False):
        vals = [self.rng.gauss(0.0, 1.0) for _ in range(prod(shape))]
        if positive:
            vals = [abs(v) + 0.5 for v in vals]
        return HostTensor(shape, dtype, layout, vals)

    def empty(self, shape, dtype="f32", layout="NCHW"):
        return HostTensor(shape, dtype, layout, [float("nan")] * prod(shape))

    def workspace(self, nbytes):
        return (ctypes.c_uint8 * max(int(nbytes), 1))()

    def ptr(self, t):
        return ctypes.addressof(t.buf if isinstance(t, HostTensor) else t)

    def strides(self, t):
        return t.strides()

    def ref(self, t):
        return PyRef(t.shape, t.values())

    def sync(self):
        pass

    def rel_l2(self, got, want):
        g = got.values()
        num = math.sqrt(sum((a - b) ** 2 for a, b in zip(g, want.data)))
        den = math.sqrt(sum(b * b for b in want.data))
        return num / den

    @staticmethod
    def _taps(xs, ws, pad, stride, dil):
        N, C, Hh, W = xs
        K, _, R, S = ws
        OH = (Hh + 2 * pad - (dil * (R - 1) + 1)) // stride + 1
        OW = (W + 2 * pad - (dil * (S - 1) + 1)) // stride + 1
        for n, k, oh, ow, c, r, s in itertools.product(range(N), range(K), range(OH), range(OW), range(C), range(R), range(S)):
            ih, iw = oh * stride - pad + r * dil, ow * stride - pad + s * dil
            if 0 <= ih < Hh and 0 <= iw < W:
                yield (((n * C + c) * Hh + ih) * W + iw, ((k * C + c) * R + r) * S + s, ((n * K + k) * OH + oh) * OW + ow)
        return

    @staticmethod
    def _out_shape(xs, ws, pad, stride, dil):
        N, C, Hh, W = xs
        K, _, R, S = ws
        return (N, K, (Hh + 2 * pad - (dil * (R - 1) + 1)) // stride + 1, (W + 2 * pad - (dil * (S - 1) + 1)) // stride + 1)

    def conv(self, x, w, pad, stride, dil):
        ys = self._out_shape(x.shape, w.shape, pad, stride, dil)
        y = [0.0] * prod(ys)
        for xi, wi, yi in self._taps(x.shape, w.shape, pad, stride, dil):
            y[yi] += x.data[xi] * w.data[wi]
        return PyRef(ys, y)

    def conv_bwd_data(self, dy, w, x_shape, pad, stride, dil):
        dx = [0.0] * prod(x_shape)
        for xi, wi, yi in self._taps(x_shape, w.shape, pad, stride, dil):
            dx[xi] += dy.data[yi] * w.data[wi]
        return PyRef(x_shape, dx)

    def conv_bwd_weights(self, x, dy, w_shape, pad, stride, dil):
        dw = [0.0] * prod(w_shape)
        for xi, wi, yi in self._taps(x.shape, w_shape, pad, stride, dil):
            dw[wi] += x.data[xi] * dy.data[yi]
        return PyRef(w_shape, dw)

    def relu(self, t):
        return PyRef(t.shape, [max(v, 0.0) for v in t.data])

    def leaky(self, t, slope):
        return PyRef(t.shape, [v if v > 0 else slope * v for v in t.data])

    def sqrt(self, t):
        return PyRef(t.shape, [math.sqrt(v) for v in t.data])


# ======================================================================================
# Checks
# ======================================================================================

RESULTS = []


def check(name, fn):
    try:
        detail = fn()
        RESULTS.append((name, True))
        print(f"OK   {name}" + (f"  ({detail})" if detail else ""), flush=True)
    except Exception as e:  # noqa: BLE001 - every failure becomes a FAIL line
        RESULTS.append((name, False))
        print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
        if os.environ.get("CAPI_SMOKE_TRACE"):
            traceback.print_exc()


def expect_close(B, what, got, want, dtype):
    err = B.rel_l2(got, want)
    tol = TOL[dtype]
    if not err <= tol:  # NaN fails too
        raise AssertionError(f"{what}: relative L2 error {err:.3e} > {tol:g}")
    return err


class Geom:
    def __init__(self, n, c, h, w, k, r, s, pad, stride, dil):
        self.n, self.c, self.h, self.w, self.k, self.r, self.s = n, c, h, w, k, r, s
        self.pad, self.stride, self.dil = pad, stride, dil
        self.oh = (h + 2 * pad - (dil * (r - 1) + 1)) // stride + 1
        self.ow = (w + 2 * pad - (dil * (s - 1) + 1)) // stride + 1

    @property
    def xs(self): return (self.n, self.c, self.h, self.w)
    @property
    def ws(self): return (self.k, self.c, self.r, self.s)
    @property
    def ys(self): return (self.n, self.k, self.oh, self.ow)
    @property
    def cv(self): return (self.pad, self.stride, self.dil)

    def __str__(self):
        return (f"x {self.n}x{self.c}x{self.h}x{self.w} w {self.k}x{self.c}x{self.r}x{self.s} "
                f"pad {self.pad} stride {self.stride} dil {self.dil}")


def geometries(small):
    if small:  # CPU mode: the plain-Python references stay fast
        return {"fusion": Geom(2, 3, 6, 7, 4, 3, 3, 1, 1, 1), "find": Geom(2, 3, 7, 6, 4, 3, 3, 1, 2, 1),
                "imm": Geom(2, 2, 7, 7, 3, 3, 3, 2, 2, 2), "bwd": Geom(2, 3, 6, 5, 2, 3, 2, 1, 2, 1),
                "bn": Geom(2, 2, 5, 5, 3, 1, 1, 0, 1, 1)}
    return {"fusion": Geom(4, 32, 19, 21, 48, 3, 3, 1, 1, 1), "find": Geom(4, 24, 27, 26, 40, 3, 3, 1, 2, 1),
            "imm": Geom(2, 16, 23, 23, 24, 3, 3, 2, 2, 2), "bwd": Geom(4, 24, 18, 17, 32, 3, 2, 1, 2, 1),
            "bn": Geom(4, 32, 20, 20, 64, 1, 1, 0, 1, 1)}


def check_fusion_cba(B, h, g, dtype, layout):
    """MIOpen's Fusion API example: conv + bias + ReLU, compiled once, run twice."""
    xd = tensor_desc(dtype, g.xs, layout)
    wd = tensor_desc(dtype, g.ws, layout)
    yd = tensor_desc(dtype, g.ys, layout)
    bd = tensor_desc(dtype, (1, g.k, 1, 1))
    cd = conv_desc(*g.cv)
    dims = [c_int() for _ in range(4)]
    call("miopenGetConvolutionForwardOutputDim", cd, xd, wd, *[ctypes.byref(d) for d in dims])
    if tuple(d.value for d in dims) != g.ys:
        raise AssertionError(f"output dim {[d.value for d in dims]} != {g.ys}")
    plan = out_handle("miopenCreateFusionPlan", VERTICAL_FUSION, xd)
    Created.add("miopenDestroyFusionPlan", plan)
    args = Created.add("miopenDestroyOperatorArgs", out_handle("miopenCreateOperatorArgs"))
    conv_op = out_handle("miopenCreateOpConvForward", plan, OUT, cd, wd)
    bias_op = out_handle("miopenCreateOpBiasForward", plan, OUT, bd)
    act_op = out_handle("miopenCreateOpActivationForward", plan, OUT, ACT_RELU)
    got_op = out_handle("miopenFusionPlanGetOp", plan, 1, OUT)
    if got_op.value != bias_op.value:
        raise AssertionError("miopenFusionPlanGetOp(1) is not the bias op")
    call("miopenCompileFusionPlan", h, plan)
    errs = []
    y = B.empty(g.ys, dtype, layout)
    for rnd in range(2):  # new data, weights and bias each round
        x, w, b = B.rand(g.xs, dtype, layout), B.rand(g.ws, dtype, layout), B.rand((1, g.k, 1, 1), dtype)
        if rnd == 0:
            for t, d, what in ((x, xd, "x"), (w, wd, "w"), (y, yd, "y")):
                if desc_strides(d)[1] != B.strides(t):
                    raise AssertionError(f"{what} descriptor strides {desc_strides(d)[1]} != tensor strides {B.strides(t)}")
        alpha, beta = c_float(1.0), c_float(0.0)
        call("miopenSetOpArgsConvForward", args, conv_op, ctypes.byref(alpha), ctypes.byref(beta), ptr(B.ptr(w)))
        call("miopenSetOpArgsActivForward", args, act_op, ctypes.byref(alpha), ctypes.byref(beta), 0.0, 0.0, 0.0)
        call("miopenSetOpArgsBiasForward", args, bias_op, ctypes.byref(alpha), ctypes.byref(beta), ptr(B.ptr(b)))
        call("miopenExecuteFusionPlan", h, plan, xd, ptr(B.ptr(x)), yd, ptr(B.ptr(y)), args)
        want = B.relu(B.conv(B.ref(x), B.ref(w), *g.cv) + B.ref(b))
        errs.append(expect_close(B, f"round {rnd}", y, want, dtype))
    return "rel L2 " + ", ".join(f"{e:.1e}" for e in errs)


def check_find_forward(B, h, g):
    xd, wd, yd, cd = tensor_desc("f32", g.xs), tensor_desc("f32", g.ws), tensor_desc("f32", g.ys), conv_desc(*g.cv)
    x, w, y = B.rand(g.xs), B.rand(g.ws), B.empty(g.ys)
    ref = B.conv(B.ref(x), B.ref(w), *g.cv)
    wsz = c_size_t(0)
    call("miopenConvolutionForwardGetWorkSpaceSize", h, wd, xd, cd, yd, ctypes.byref(wsz))
    ws = B.workspace(wsz.value)
    perf = (ConvAlgoPerf * 4)()
    ret = c_int(-1)
    call("miopenFindConvolutionForwardAlgorithm", h, xd, ptr(B.ptr(x)), wd, ptr(B.ptr(w)), cd, yd, ptr(B.ptr(y)),
         4, ctypes.byref(ret), perf, ptr(B.ptr(ws)), wsz.value, False)
    if not 1 <= ret.value <= 4:
        raise AssertionError(f"Find returned {ret.value} algorithms")
    for i in range(ret.value):
        if perf[i].memory > wsz.value or perf[i].time < 0 or (i and perf[i].time < perf[i - 1].time):
            raise AssertionError(f"perf[{i}] = algo {perf[i].algo} time {perf[i].time} memory {perf[i].memory}")
    found = ", ".join(f"{FWD_ALGOS.get(perf[i].algo, perf[i].algo)} {perf[i].time:.3f}ms" for i in range(ret.value))
    expect_close(B, "Find's y", y, ref, "f32")
    for i in range(ret.value):
        algo = perf[i].algo
        y2 = B.empty(g.ys)
        call("miopenConvolutionForward", h, f32(1.0), xd, ptr(B.ptr(x)), wd, ptr(B.ptr(w)), cd, algo, f32(0.0),
             yd, ptr(B.ptr(y2)), ptr(B.ptr(ws)), wsz.value)
        expect_close(B, f"Forward algo {algo}", y2, ref, "f32")
        # y = 2 * conv + 1 * y = 3 * conv
        call("miopenConvolutionForward", h, f32(2.0), xd, ptr(B.ptr(x)), wd, ptr(B.ptr(w)), cd, algo, f32(1.0),
             yd, ptr(B.ptr(y2)), ptr(B.ptr(ws)), wsz.value)
        expect_close(B, f"Forward algo {algo} alpha 2 beta 1", y2, 3.0 * ref, "f32")
    return f"workspace {wsz.value} B; found {found}"


def immediate_checks(B, h, g):
    """One check per listed solution in each direction."""
    xd, wd, yd, cd = tensor_desc("f32", g.xs), tensor_desc("f32", g.ws), tensor_desc("f32", g.ys), conv_desc(*g.cv)
    x, w, dy = B.rand(g.xs), B.rand(g.ws), B.rand(g.ys)
    rx, rw, rdy = B.ref(x), B.ref(w), B.ref(dy)
    dirs = [
        # name, four descriptors, (inputs of Immediate), output shape/desc, reference
        ("Forward", (wd, xd, cd, yd), (wd, w, xd, x), g.ys, lambda: B.conv(rx, rw, *g.cv)),
        ("BackwardData", (yd, wd, cd, xd), (yd, dy, wd, w), g.xs, lambda: B.conv_bwd_data(rdy, rw, g.xs, *g.cv)),
        ("BackwardWeights", (yd, xd, cd, wd), (yd, dy, xd, x), g.ws, lambda: B.conv_bwd_weights(rx, rdy, g.ws, *g.cv)),
    ]
    for name, descs, (ad, a, bd_, b), out_shape, reference in dirs:
        fn = f"miopenConvolution{name}"
        listed = []

        def list_solutions(fn=fn, descs=descs, listed=listed):
            count = c_size_t(0)
            call(fn + "GetSolutionCount", h, *descs, ctypes.byref(count))
            sols = (ConvSolution * 32)()
            n = c_size_t(0)
            call(fn + "GetSolution", h, *descs, 32, ctypes.byref(n), sols)
            if not 1 <= n.value <= count.value:
                raise AssertionError(f"{n.value} solutions listed, count {count.value}")
            listed.extend(sols[i] for i in range(n.value))
            if any(s.solution_id == 0 for s in listed):
                raise AssertionError("solution id 0 listed")
            return f"count {count.value}: " + ", ".join(
                f"id {s.solution_id} {FWD_ALGOS.get(s.algorithm, s.algorithm)} ws {s.workspace_size}" for s in listed)

        check(f"immediate {name}: solutions ({g})", list_solutions)
        want = [None]
        for s in listed:
            def run_one(s=s, fn=fn, descs=descs, ad=ad, a=a, bd_=bd_, b=b, out_shape=out_shape):
                wsz = c_size_t(0)
                call(fn + "GetSolutionWorkspaceSize", h, *descs, s.solution_id, ctypes.byref(wsz))
                if wsz.value != s.workspace_size:
                    raise AssertionError(f"workspace {wsz.value} != listed {s.workspace_size}")
                call(fn + "CompileSolution", h, *descs, s.solution_id)
                ws = B.workspace(wsz.value)
                out = B.empty(out_shape)
                call(fn + "Immediate", h, ad, ptr(B.ptr(a)), bd_, ptr(B.ptr(b)), descs[2], descs[3], ptr(B.ptr(out)),
                     ptr(B.ptr(ws)), wsz.value, s.solution_id)
                if want[0] is None:
                    want[0] = reference()
                return f"rel L2 {expect_close(B, 'output', out, want[0], 'f32'):.1e}"

            check(f"immediate {name}: solution {s.solution_id} ({FWD_ALGOS.get(s.algorithm, s.algorithm)})", run_one)


def check_backward(B, h, g, which):
    xd, wd, yd, cd = tensor_desc("f32", g.xs), tensor_desc("f32", g.ws), tensor_desc("f32", g.ys), conv_desc(*g.cv)
    x, w, dy = B.rand(g.xs), B.rand(g.ws), B.rand(g.ys)
    wsz, ret, perf = c_size_t(0), c_int(0), (ConvAlgoPerf * 4)()
    if which == "data":
        want = B.conv_bwd_data(B.ref(dy), B.ref(w), g.xs, *g.cv)
        out, od, shape = B.empty(g.xs), xd, g.xs
        call("miopenConvolutionBackwardDataGetWorkSpaceSize", h, yd, wd, cd, xd, ctypes.byref(wsz))
        ws = B.workspace(wsz.value)
        call("miopenFindConvolutionBackwardDataAlgorithm", h, yd, ptr(B.ptr(dy)), wd, ptr(B.ptr(w)), cd, xd,
             ptr(B.ptr(out)), 4, ctypes.byref(ret), perf, ptr(B.ptr(ws)), wsz.value, False)

        def run(algo, alpha, beta, o):
            call("miopenConvolutionBackwardData", h, f32(alpha), yd, ptr(B.ptr(dy)), wd, ptr(B.ptr(w)), cd, algo,
                 f32(beta), xd, ptr(B.ptr(o)), ptr(B.ptr(ws)), wsz.value)
    else:
        want = B.conv_bwd_weights(B.ref(x), B.ref(dy), g.ws, *g.cv)
        out, od, shape = B.empty(g.ws), wd, g.ws
        call("miopenConvolutionBackwardWeightsGetWorkSpaceSize", h, yd, xd, cd, wd, ctypes.byref(wsz))
        ws = B.workspace(wsz.value)
        call("miopenFindConvolutionBackwardWeightsAlgorithm", h, yd, ptr(B.ptr(dy)), xd, ptr(B.ptr(x)), cd, wd,
             ptr(B.ptr(out)), 4, ctypes.byref(ret), perf, ptr(B.ptr(ws)), wsz.value, False)

        def run(algo, alpha, beta, o):
            call("miopenConvolutionBackwardWeights", h, f32(alpha), yd, ptr(B.ptr(dy)), xd, ptr(B.ptr(x)), cd, algo,
                 f32(beta), wd, ptr(B.ptr(o)), ptr(B.ptr(ws)), wsz.value)
    if not 1 <= ret.value <= 4:
        raise AssertionError(f"Find returned {ret.value} algorithms")
    expect_close(B, "Find's output", out, want, "f32")
    for i in range(ret.value):
        algo = perf[i].algo
        o = B.empty(shape)
        run(algo, 1.0, 0.0, o)
        expect_close(B, f"algo {algo}", o, want, "f32")
        run(algo, 1.0, 1.0, o)  # beta = 1 accumulates
        expect_close(B, f"algo {algo} beta 1", o, 2.0 * want, "f32")
    return f"workspace {wsz.value} B; found " + ", ".join(
        f"{FWD_ALGOS.get(perf[i].algo, perf[i].algo)} {perf[i].time:.3f}ms" for i in range(ret.value))


def check_cba(B, h, g):
    """y = relu(2 * conv(x, w) + 1 * z + bias) in one call; every algorithm is tried, those
    without a fused solver must answer UnsupportedOp, at least one must run and be right."""
    xd, wd, yd, cd = tensor_desc("f32", g.xs), tensor_desc("f32", g.ws), tensor_desc("f32", g.ys), conv_desc(*g.cv)
    bd = tensor_desc("f32", (1, g.k, 1, 1))
    act = Created.add("miopenDestroyActivationDescriptor", out_handle("miopenCreateActivationDescriptor"))
    call("miopenSetActivationDescriptor", act, ACT_RELU, 0.0, 0.0, 0.0)
    x, w, z, b = B.rand(g.xs), B.rand(g.ws), B.rand(g.ys), B.rand((1, g.k, 1, 1))
    want = B.relu(2.0 * B.conv(B.ref(x), B.ref(w), *g.cv) + B.ref(z) + B.ref(b))
    ran, skipped = [], []
    for algo in (1, 5, 0, 3, 2):
        y = B.empty(g.ys)
        st = raw("miopenConvolutionBiasActivationForward", h, f32(2.0), xd, ptr(B.ptr(x)), wd, ptr(B.ptr(w)), cd, algo,
                 None, 0, f32(1.0), yd, ptr(B.ptr(z)), bd, ptr(B.ptr(b)), act, yd, ptr(B.ptr(y)))
        if st == UNSUPPORTED_OP:
            skipped.append(FWD_ALGOS[algo])
            continue
        if st != SUCCESS:
            raise MiopenError(f"miopenConvolutionBiasActivationForward(algo {algo})", st, last_error())
        ran.append(f"{FWD_ALGOS[algo]} {expect_close(B, FWD_ALGOS[algo], y, want, 'f32'):.1e}")
    if not ran:
        raise AssertionError(f"no algorithm ran (UnsupportedOp for {skipped}): {last_error()}")
    return "ran " + ", ".join(ran) + ("; unsupported " + ", ".join(skipped) if skipped else "")


def check_bn_act(B, h, g, dtype, layout, with_conv):
    """BN inference (spatial) + LEAKYRELU through a fusion plan: alone on a tensor (NA), or
    after conv + bias (CBNA)."""
    slope, eps = 0.1, 1e-5
    ys = g.ys
    yd = tensor_desc(dtype, ys, layout)
    bnd = Created.add("miopenDestroyTensorDescriptor", out_handle("miopenCreateTensorDescriptor"))
    call("miopenDeriveBNTensorDescriptor", bnd, yd, BN_SPATIAL)
    dims, _ = desc_strides(bnd)
    if dims != [1, g.k, 1, 1]:
        raise AssertionError(f"derived BN descriptor {dims}")
    scale, shift = B.rand((1, g.k, 1, 1)), B.rand((1, g.k, 1, 1))
    mean, var = B.rand((1, g.k, 1, 1)), B.rand((1, g.k, 1, 1), positive=True)
    if with_conv:
        xd, wd, cd = tensor_desc(dtype, g.xs, layout), tensor_desc(dtype, g.ws, layout), conv_desc(*g.cv)
        bd = tensor_desc(dtype, (1, g.k, 1, 1))
        plan = Created.add("miopenDestroyFusionPlan", out_handle("miopenCreateFusionPlan", VERTICAL_FUSION, xd))
        conv_op = out_handle("miopenCreateOpConvForward", plan, OUT, cd, wd)
        bias_op = out_handle("miopenCreateOpBiasForward", plan, OUT, bd)
        inp, ind = B.rand(g.xs, dtype, layout), xd
    else:
        plan = Created.add("miopenDestroyFusionPlan", out_handle("miopenCreateFusionPlan", VERTICAL_FUSION, yd))
        inp, ind = B.rand(ys, dtype, layout), yd
    bn_op = out_handle("miopenCreateOpBatchNormInference", plan, OUT, BN_SPATIAL, bnd)
    act_op = out_handle("miopenCreateOpActivationForward", plan, OUT, ACT_LEAKYRELU)
    call("miopenCompileFusionPlan", h, plan)
    args = Created.add("miopenDestroyOperatorArgs", out_handle("miopenCreateOperatorArgs"))
    pre = B.ref(inp)
    if with_conv:
        w, b = B.rand(g.ws, dtype, layout), B.rand((1, g.k, 1, 1), dtype)
        call("miopenSetOpArgsConvForward", args, conv_op, None, None, ptr(B.ptr(w)))
        call("miopenSetOpArgsBiasForward", args, bias_op, None, None, ptr(B.ptr(b)))
        pre = B.conv(pre, B.ref(w), *g.cv) + B.ref(b)
    call("miopenSetOpArgsBatchNormInference", args, bn_op, None, None, ptr(B.ptr(scale)), ptr(B.ptr(shift)),
         ptr(B.ptr(mean)), ptr(B.ptr(var)), eps)
    call("miopenSetOpArgsActivForward", args, act_op, None, None, slope, 0.0, 0.0)
    y = B.empty(ys, dtype, layout)
    call("miopenExecuteFusionPlan", h, plan, ind, ptr(B.ptr(inp)), yd, ptr(B.ptr(y)), args)
    want = B.leaky(B.ref(scale) * (pre - B.ref(mean)) / B.sqrt(B.ref(var) + eps) + B.ref(shift), slope)
    return f"rel L2 {expect_close(B, 'y', y, want, dtype):.1e}"


# MIOpen's allocator callbacks: void* (*)(void* ctx, size_t bytes), void (*)(void* ctx, void* mem).
ALLOC_FN = ctypes.CFUNCTYPE(c_void_p, c_void_p, c_size_t)
FREE_FN = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)


def check_allocator(B, h, g):
    """miopenSetAllocator with torch memory: a fusion plan whose solver needs scratch (f32
    NCHW: layout copies and the split filter) takes it from the callbacks and gives it all
    back; NULL restores conflux's pool."""
    import torch
    live, calls = {}, [0, 0]

    def alloc(ctx, nbytes):
        t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        live[t.data_ptr()] = t
        calls[0] += 1
        return t.data_ptr()

    def free(ctx, mem):
        calls[1] += 1
        live.pop(mem)

    cb = (ALLOC_FN(alloc), FREE_FN(free))  # kept alive while installed
    call("miopenSetAllocator", h, ctypes.cast(cb[0], c_void_p), ctypes.cast(cb[1], c_void_p), None)
    try:
        check_fusion_cba(B, h, g, "f32", "NCHW")
    finally:
        call("miopenSetAllocator", h, None, None, None)
    if calls[0] == 0 or calls[0] != calls[1] or live:
        raise AssertionError(f"{calls[0]} allocations, {calls[1]} frees, {len(live)} live")
    return f"{calls[0]} allocations, all freed"


def check_profiling(B, h, g):
    xd, wd, yd, cd = tensor_desc("f32", g.xs), tensor_desc("f32", g.ws), tensor_desc("f32", g.ys), conv_desc(*g.cv)
    x, w, y = B.rand(g.xs), B.rand(g.ws), B.empty(g.ys)
    wsz = c_size_t(0)
    call("miopenConvolutionForwardGetWorkSpaceSize", h, wd, xd, cd, yd, ctypes.byref(wsz))
    ws = B.workspace(wsz.value)
    perf, ret = (ConvAlgoPerf * 1)(), c_int(0)
    call("miopenFindConvolutionForwardAlgorithm", h, xd, ptr(B.ptr(x)), wd, ptr(B.ptr(w)), cd, yd, ptr(B.ptr(y)),
         1, ctypes.byref(ret), perf, ptr(B.ptr(ws)), wsz.value, False)
    call("miopenEnableProfiling", h, True)
    try:
        call("miopenConvolutionForward", h, f32(1.0), xd, ptr(B.ptr(x)), wd, ptr(B.ptr(w)), cd, perf[0].algo, f32(0.0),
             yd, ptr(B.ptr(y)), ptr(B.ptr(ws)), wsz.value)
        B.sync()
        t = c_float(-1.0)
        call("miopenGetKernelTime", h, ctypes.byref(t))
    finally:
        call("miopenEnableProfiling", h, False)
    expect_close(B, "y", y, B.conv(B.ref(x), B.ref(w), *g.cv), "f32")
    if B.name == "cuda" and not t.value > 0.0:
        raise AssertionError(f"miopenGetKernelTime = {t.value} ms after a profiled run, want > 0")
    if B.name == "cpu" and not t.value >= 0.0:
        raise AssertionError(f"miopenGetKernelTime = {t.value} ms, want >= 0 (CPU handles report 0)")
    return f"kernel time {t.value:.4f} ms ({FWD_ALGOS.get(perf[0].algo, perf[0].algo)})"


def check_errors(B, h, g):
    name = LIB.miopenGetErrorString(BAD_PARM)
    if name != b"miopenStatusBadParm":
        raise AssertionError(f"miopenGetErrorString(3) = {name!r}")
    # NULL output pointer.
    st = raw("miopenGetKernelTime", h, None)
    if st != BAD_PARM or not last_error():
        raise AssertionError(f"miopenGetKernelTime(handle, NULL) -> {st}, reason {last_error()!r}")
    # NULL input data pointer to a compiled plan: BadParm, nothing written.
    xd, yd = tensor_desc("f32", g.ys), tensor_desc("f32", g.ys)
    plan = Created.add("miopenDestroyFusionPlan", out_handle("miopenCreateFusionPlan", VERTICAL_FUSION, xd))
    act_op = out_handle("miopenCreateOpActivationForward", plan, OUT, ACT_RELU)
    call("miopenCompileFusionPlan", h, plan)
    args = Created.add("miopenDestroyOperatorArgs", out_handle("miopenCreateOperatorArgs"))
    call("miopenSetOpArgsActivForward", args, act_op, None, None, 0.0, 0.0, 0.0)
    y = B.empty(g.ys)
    st = raw("miopenExecuteFusionPlan", h, plan, xd, None, yd, ptr(B.ptr(y)), args)
    reason = last_error()
    if st != BAD_PARM:
        raise AssertionError(f"ExecuteFusionPlan(input NULL) -> {STATUS_NAMES.get(st, st)}, want miopenStatusBadParm")
    if not reason:
        raise AssertionError("confluxGetLastErrorMessage() is empty after a failure")
    # NULL handle.
    st = raw("miopenExecuteFusionPlan", None, plan, xd, ptr(B.ptr(y)), yd, ptr(B.ptr(y)), args)
    if st != BAD_PARM or not last_error():
        raise AssertionError(f"ExecuteFusionPlan(handle NULL) -> {st}")
    return f"reason: {reason}"


# ======================================================================================


def find_lib(arg):
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [arg] if arg else []
    cands += [os.environ.get("CONFLUX_CAPI_LIB"), os.path.join(here, "lib", "libMIOpen.so"),
              os.path.join(here, "..", "..", ".gpu", "lib", "libMIOpen.so"), os.path.join(".gpu", "lib", "libMIOpen.so"),
              os.path.join(here, "..", "..", "target", "release", "libMIOpen.so")]
    for c in cands:
        if c and os.path.exists(c):
            return os.path.abspath(c)
    sys.exit(f"libMIOpen.so not found (tried {[c for c in cands if c]}); pass --lib")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", help="path of libMIOpen.so (default: .gpu/lib/libMIOpen.so)")
    ap.add_argument("--cpu", action="store_true", help="host buffers, CPU backend, plain-Python references")
    ap.add_argument("--small", action="store_true", help="the CPU mode's tiny shapes on the GPU too")
    ap.add_argument("--default-stream", action="store_true", help="use torch's default stream, not a side stream")
    ap.add_argument("--seed", type=int, default=1234)
    opt = ap.parse_args()
    faulthandler.enable()  # a crash inside the library still names the check it happened in

    if opt.cpu:
        os.environ["CONFLUX_DEVICE"] = "cpu"
        B = PyBackend(opt.seed)
    else:
        # The CUDA runtime libraries the library loads (as scripts/gpu/run_tests.sh sets up).
        if os.path.isdir("/usr/local/cuda/lib64") and "/usr/local/cuda/lib64" not in os.environ.get("LD_LIBRARY_PATH", ""):
            os.environ["LD_LIBRARY_PATH"] = "/usr/local/cuda/lib64:" + os.environ.get("LD_LIBRARY_PATH", "")
            os.execv(sys.executable, [sys.executable] + sys.argv)
        os.environ.setdefault("CONFLUX_CACHE_DIR", "/tmp/conflux-cache")
        if os.environ.get("CONFLUX_DEVICE", "").startswith("cpu"):
            sys.exit("CONFLUX_DEVICE=cpu would hand torch's device pointers to the CPU backend; use --cpu")
        try:
            import torch
        except ImportError:
            sys.exit("PyTorch is not importable; use --cpu for the CPU backend with host buffers")
        if not torch.cuda.is_available():
            sys.exit("torch sees no CUDA device; use --cpu for the CPU backend")
        # The library's device must be torch's (pointers and stream belong to it).
        os.environ.setdefault("CONFLUX_DEVICE", f"cuda:{torch.cuda.current_device()}")
        torch.cuda.init()
        B = TorchBackend(opt.seed)

    path = find_lib(opt.lib)
    load(path)
    ver = [c_size_t() for _ in range(3)]
    call("miopenGetVersion", *[ctypes.byref(v) for v in ver])
    print(f"# {path}: MIOpen API {'.'.join(str(v.value) for v in ver)}, backend {B.name}, "
          f"CONFLUX_DEVICE={os.environ.get('CONFLUX_DEVICE')}", flush=True)

    if B.name == "cuda":
        import torch
        ctx = torch.cuda.stream(torch.cuda.current_stream() if opt.default_stream else torch.cuda.Stream())
    else:
        import contextlib
        ctx = contextlib.nullcontext()

    geo = geometries(opt.small or opt.cpu)
    with ctx:
        stream = B.stream()
        h = c_void_p()
        handle_ok = [False]

        def create_handle():
            call("miopenCreateWithStream", ctypes.byref(h), ptr(stream))
            handle_ok[0] = True
            got = c_void_p(12345)
            call("miopenGetStream", h, ctypes.byref(got))
            if (got.value or 0) != (stream or 0):
                raise AssertionError(f"miopenGetStream = {got.value:#x}, created with {stream or 0:#x}")
            return f"stream {stream or 0:#x}"

        check("miopenCreateWithStream on torch's current stream" if B.name == "cuda" else "miopenCreateWithStream(NULL)",
              create_handle)
        if handle_ok[0]:
            g = geo["fusion"]
            check(f"fusion conv+bias+relu f32 NCHW x2 ({g})", lambda: check_fusion_cba(B, h, g, "f32", "NCHW"))
            check(f"fusion conv+bias+relu f16 NHWC x2 ({g})", lambda: check_fusion_cba(B, h, g, "f16", "NHWC"))
            g = geo["find"]
            check(f"find + forward f32 ({g})", lambda: check_find_forward(B, h, g))
            immediate_checks(B, h, geo["imm"])
            g = geo["bwd"]
            check(f"find + backward data f32 ({g})", lambda: check_backward(B, h, g, "data"))
            check(f"find + backward weights f32 ({g})", lambda: check_backward(B, h, g, "weights"))
            g = geo["find"]
            check(f"conv+bias+activation one call f32 ({g})", lambda: check_cba(B, h, g))
            g = geo["bn"]
            check(f"fusion BN inference + leaky relu f32 NCHW (y {g.ys})", lambda: check_bn_act(B, h, g, "f32", "NCHW", False))
            check(f"fusion BN inference + leaky relu f16 NHWC (y {g.ys})", lambda: check_bn_act(B, h, g, "f16", "NHWC", False))
            check(f"fusion conv+bias+BN inference+leaky relu f32 NCHW ({g})", lambda: check_bn_act(B, h, g, "f32", "NCHW", True))
            g = geo["fusion"]
            if B.name == "cuda":
                check(f"miopenSetAllocator: scratch from torch memory ({g})", lambda: check_allocator(B, h, g))
            check("profiling: miopenGetKernelTime after a run", lambda: check_profiling(B, h, g))
            check("error path: NULL pointers give miopenStatusBadParm and a reason", lambda: check_errors(B, h, geo["bn"]))
            B.sync()
            check("destroy every object and the handle", lambda: (Created.destroy_all(), call("miopenDestroy", h))[0])

    failed = [n for n, ok in RESULTS if not ok]
    print(f"# {len(RESULTS) - len(failed)} of {len(RESULTS)} checks passed" + (f"; FAILED: {failed}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
