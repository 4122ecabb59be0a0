"""Pieces the GPU benchmark scripts share (staged into .gpu/ beside them by build.sh): reading a
zoo layer list, an N-D convolution descriptor, a backward convolution found, then run, through
the C API, and one call's timing and profiler trace.
"""
import ctypes as C
from miopen_ctypes import P

ONE, ZERO = C.c_float(1.0), C.c_float(0.0)


def read_list(path, n):
    """(layer with batch n, model, count) for each line `cfg  # model xcount` of a zoo list."""
    for line in open(path):
        cfg, _, tail = line.strip().partition("#")
        if not cfg.strip():
            continue
        v = (n,) + tuple(map(int, cfg.strip().split("-")))[1:]
        yield v, tail.split()[0], int(tail.split()[1].lstrip("x"))


def conv_desc_nd(lib, pad, stride, dil, groups):
    """A convolution descriptor over len(pad) spatial dimensions (miopenInitConvolutionNdDescriptor)."""
    c = P()
    lib.miopenCreateConvolutionDescriptor(C.byref(c))
    arr = lambda v: (C.c_int * len(v))(*v)
    lib.miopenInitConvolutionNdDescriptor(c, len(pad), arr(pad), arr(stride), arr(dil), 0)
    if groups != 1:
        lib.miopenSetConvolutionGroupCount(c, groups)
    return c


class Perf(C.Structure):
    _fields_ = [("algo", C.c_int), ("time", C.c_float), ("memory", C.c_size_t)]


def backward_runner(mio, kind, yd, gy, wd, w, xd, x, cd, od, out):
    """Find the algorithm of backward-data (kind "dx", out = dx) or backward-weights ("dw", out =
    dw) with its workspace, and return a call that runs it (α = 1, β = 0) into out."""
    import torch
    L = mio.lib
    ws = C.c_size_t(0)
    if kind == "dx":
        L.miopenConvolutionBackwardDataGetWorkSpaceSize(mio.h, yd, wd, cd, xd, C.byref(ws))
    else:
        L.miopenConvolutionBackwardWeightsGetWorkSpaceSize(mio.h, yd, xd, cd, wd, C.byref(ws))
    wsb = torch.empty(max(ws.value, 1), dtype=torch.uint8, device="cuda")
    perf, n = Perf(), C.c_int(0)
    if kind == "dx":
        L.miopenFindConvolutionBackwardDataAlgorithm(mio.h, yd, P(gy.data_ptr()), wd, P(w.data_ptr()), cd, od, P(out.data_ptr()),
                                                     1, C.byref(n), C.byref(perf), P(wsb.data_ptr()), C.c_size_t(ws.value), False)
        return lambda: L.miopenConvolutionBackwardData(mio.h, C.byref(ONE), yd, P(gy.data_ptr()), wd, P(w.data_ptr()), cd, perf.algo,
                                                       C.byref(ZERO), od, P(out.data_ptr()), P(wsb.data_ptr()), C.c_size_t(ws.value))
    L.miopenFindConvolutionBackwardWeightsAlgorithm(mio.h, yd, P(gy.data_ptr()), xd, P(x.data_ptr()), cd, od, P(out.data_ptr()),
                                                    1, C.byref(n), C.byref(perf), P(wsb.data_ptr()), C.c_size_t(ws.value), False)
    return lambda: L.miopenConvolutionBackwardWeights(mio.h, C.byref(ONE), yd, P(gy.data_ptr()), xd, P(x.data_ptr()), cd, perf.algo,
                                                      C.byref(ZERO), od, P(out.data_ptr()), P(wsb.data_ptr()), C.c_size_t(ws.value))


def timed_trace(f, flush):
    """(median µs of 30 CUDA-event-timed calls, each after an L2 flush as do_bench does; the GPU
    activities of one more call under the torch profiler as (name, start µs after the flush,
    duration µs))."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import profile, ProfilerActivity
    for _ in range(3):
        f()
    times = []
    for _ in range(30):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.zero_()
        s.record(); f(); e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        flush.zero_()
        f()
        torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    t0 = evs[0].time_range.end if evs else 0
    return sorted(times)[len(times) // 2], [(e.name, e.time_range.start - t0, e.time_range.elapsed_us()) for e in evs[1:]]
