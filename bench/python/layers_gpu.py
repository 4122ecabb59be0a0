"""Pooling and softmax through the C API (libMIOpen.so, ctypes) against PyTorch's (cuDNN /
ATen) on the same stream: the pooling and softmax layers of the torchvision zoo, fp16 and f32,
channels-last and NCHW. Each result is checked against PyTorch before it is timed.

    MIOPEN_LIB_PATH=.gpu/lib/libMIOpen.so python3 bench/python/layers_gpu.py [--reps 50]
"""
import argparse
import ctypes as C
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, ".gpu")
from miopen_ctypes import MIOpen, find_lib, P  # noqa: E402

DT = {torch.float16: 0, torch.float32: 1}
MAX, AVG_EXCLUSIVE = 0, 1

# (name, N, C, H, W, kind, window, stride, pad)
POOLS = [
    ("resnet stem maxpool 3x3 s2", 32, 64, 112, 112, MAX, 3, 2, 1),
    ("inception maxpool 3x3 s2", 32, 192, 71, 71, MAX, 3, 2, 0),
    ("inception branch avgpool 3x3 s1", 32, 192, 35, 35, AVG_EXCLUSIVE, 3, 1, 1),
    ("resnet-50 global avgpool 7x7", 32, 2048, 7, 7, AVG_EXCLUSIVE, 7, 7, 0),
    ("mobilenet global avgpool 7x7", 32, 1280, 7, 7, AVG_EXCLUSIVE, 7, 7, 0),
]
# (name, shape, mode) mode 0 instance (over C·H·W), 1 channel
SOFTMAXES = [
    ("classifier 1000, N=32", (32, 1000, 1, 1), 1),
    ("classifier 1000, N=1", (1, 1000, 1, 1), 1),
    ("segmentation 21 classes 128x128, N=4", (4, 21, 128, 128), 1),
]


def timed(fn, reps):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1000.0  # µs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    stream = torch.cuda.current_stream().cuda_stream
    m = MIOpen(find_lib(), stream)
    one, zero = C.c_float(1.0), C.c_float(0.0)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; times in µs, ratio = conflux / torch")
    print("| layer | type | layout | torch | conflux | ratio |")
    print("|---|---|---|---:|---:|---:|")
    for name, n, c, h, w, kind, k, s, p in POOLS:
        for dt in (torch.float16, torch.float32):
            for cl in (True, False):
                x = torch.randn(n, c, h, w, device="cuda", dtype=dt)
                if cl:
                    x = x.contiguous(memory_format=torch.channels_last)
                if kind == MAX:
                    ref = lambda: F.max_pool2d(x, k, s, p)  # noqa: E731
                else:
                    ref = lambda: F.avg_pool2d(x, k, s, p, count_include_pad=False)  # noqa: E731
                want = ref()
                y = torch.full_like(want, float("nan"))
                pd = P()
                m.lib.miopenCreatePoolingDescriptor(C.byref(pd))
                m.lib.miopenSet2dPoolingDescriptor(pd, kind, k, k, p, p, s, s)
                xd, yd = m.tensor(x, DT[dt]), m.tensor(y, DT[dt])

                def ours():
                    m.lib.miopenPoolingForward(m.h, pd, C.byref(one), xd, P(x.data_ptr()), C.byref(zero), yd,
                                               P(y.data_ptr()), False, P(), C.c_size_t(0))
                ours()
                torch.cuda.synchronize()
                err = (y.float() - want.float()).abs().max().item()
                assert err <= (2e-3 if dt == torch.float16 else 1e-5), f"{name}: max error {err}"
                t_ref, t_ours = timed(ref, a.reps), timed(ours, a.reps)
                lay = "NHWC" if cl else "NCHW"
                print(f"| {name} N={n} C={c} {h}x{w} | {str(dt)[6:]} | {lay} | {t_ref:.1f} | {t_ours:.1f} | {t_ours / t_ref:.2f} |")
    for name, shape, mode in SOFTMAXES:
        for dt in (torch.float16, torch.float32):
            x = torch.randn(*shape, device="cuda", dtype=dt)
            ref = lambda: torch.softmax(x, dim=1)  # noqa: E731
            want = ref()
            y = torch.full_like(want, float("nan"))
            xd, yd = m.tensor(x, DT[dt]), m.tensor(y, DT[dt])

            def ours():
                m.lib.miopenSoftmaxForward_V2(m.h, C.byref(one), xd, P(x.data_ptr()), C.byref(zero), yd,
                                              P(y.data_ptr()), 1, mode)
            ours()
            torch.cuda.synchronize()
            err = (y.float() - want.float()).abs().max().item()
            assert err <= (2e-3 if dt == torch.float16 else 1e-5), f"{name}: max error {err}"
            t_ref, t_ours = timed(ref, a.reps), timed(ours, a.reps)
            print(f"| softmax {name} | {str(dt)[6:]} | NCHW | {t_ref:.1f} | {t_ours:.1f} | {t_ours / t_ref:.2f} |")


if __name__ == "__main__":
    main()
