"""Per-layer table of conflux backward-data / backward-weights (C API: Find, then the chosen
algorithm) against cuDNN through torch.ops.aten.convolution_backward, timed and checked as
../shared/bench/zoo_bwd.py does (do_bench medians, same run). zoo_bwd.py prints per-model sums
and the three worst layers; this prints every layer a filter keeps, for A/B runs of one
solver (CONFLUX_DISABLE_SOLVERS set, then not).

usage: python3 bwd_layer_table.py --list zoo_public.txt [--models mobilenet_v2] [--dir dw]
                                  [--filter 1x1] [--n 32] [--prec fp16]
--filter: 1x1 (1×1 filters), grouped (groups > 1), strided (stride > 1), boxes (8 or more input
channels per group, not a multiple of 64: what the tensor-core kernels' 64-channel boxes do not
fill; 1×1 stride-1 layers, cuBLASLt GEMMs, left out), stems (fewer than 8 input channels),
or all.
"""
import argparse, collections, math
import torch
from triton.testing import do_bench
from miopen_ctypes import MIOpen, MIOpenError, FLOAT, HALF, BF16, find_lib
from zoo_common import backward_runner, read_list

ap = argparse.ArgumentParser()
ap.add_argument("--list", required=True)
ap.add_argument("--models", default="")
ap.add_argument("--dir", default="dw", choices=["dx", "dw", "both"])
ap.add_argument("--filter", default="all", choices=["all", "1x1", "grouped", "strided", "boxes", "stems"])
ap.add_argument("--n", type=int, default=32)
ap.add_argument("--prec", default="fp16")
a = ap.parse_args()

keep = {
    "all": lambda v: True,
    "1x1": lambda v: v[5] == 1 and v[6] == 1,
    "grouped": lambda v: v[11] > 1,
    "strided": lambda v: v[9] > 1 or v[10] > 1,
    "stems": lambda v: v[1] < 8,
    "boxes": lambda v: v[1] // v[11] >= 8 and v[1] // v[11] % 64 != 0 and (v[5] * v[6] > 1 or v[9] * v[10] > 1),
}[a.filter]
layers = collections.OrderedDict()
for v, model, cnt in read_list(a.list, a.n):
    if a.models and model not in a.models.split(","):
        continue
    if keep(v):
        layers.setdefault(v, []).append(f"{model} x{cnt}")

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
mio = MIOpen(find_lib(), torch.cuda.current_stream().cuda_stream)
DT = {"fp32": (torch.float32, FLOAT, 1e-4), "fp16": (torch.float16, HALF, 1e-2), "bf16": (torch.bfloat16, BF16, 2e-2)}
tdt, code, tol = DT[a.prec]
fmt = torch.contiguous_format if a.prec == "fp32" else torch.channels_last
kinds = ("dx", "dw") if a.dir == "both" else (a.dir,)
bench = lambda f: do_bench(f, warmup=10, rep=40, return_mode="median") * 1e3


def measure(cfg, kind):
    N, Cc, H, W, K, fy, fx, py, px, sy, sx, g, dy_, dx_ = cfg
    x = torch.randn(N, Cc, H, W, device="cuda", dtype=tdt).to(memory_format=fmt)
    w = (torch.randn(K, Cc // g, fy, fx, device="cuda", dtype=tdt) / math.sqrt(Cc // g * fy * fx)).to(memory_format=fmt)
    y = torch.nn.functional.conv2d(x, w, None, (sy, sx), (py, px), (dy_, dx_), g)
    gy = torch.randn_like(y)
    mask = [kind == "dx", kind == "dw", False]
    cb = lambda: torch.ops.aten.convolution_backward(gy, x, w, None, [sy, sx], [py, px], [dy_, dx_], False, [0, 0], g, mask)
    ref = cb()[0 if kind == "dx" else 1]
    peer = bench(cb)
    xd, wd, yd = mio.tensor(x, code), mio.tensor(w, code), mio.tensor(gy, code)
    cd = mio.conv_desc((py, px), (sy, sx), (dy_, dx_), g)
    out = torch.full_like(x if kind == "dx" else w, float("nan"))
    od = mio.tensor(out, code)
    run = backward_runner(mio, kind, yd, gy, wd, w, xd, x, cd, od, out)
    out.fill_(float("nan")); run(); torch.cuda.synchronize()
    err = ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()
    ok = err < tol * (2 if kind == "dw" else 1) and not torch.isnan(out).any().item()
    return bench(run), peer, ok, err


print(f"prec={a.prec} N={a.n} dir={a.dir} filter={a.filter} {torch.cuda.get_device_name()}")
print(f"{'dir':3s} {'layer':42s} {'ours us':>9s} {'cuDNN us':>9s} {'ratio':>6s}  used by")
total = [0.0, 0.0]
for cfg, uses in layers.items():
    for kind in kinds:
        tag = "-".join(map(str, cfg))
        try:
            ours, peer, ok, err = measure(cfg, kind)
        except MIOpenError as e:
            print(f"{kind:3s} {tag:42s} FAILED {str(e)[:80]}", flush=True)
            continue
        flag = "" if ok else f"  WRONG err={err:.1e}"
        print(f"{kind:3s} {tag:42s} {ours:9.1f} {peer:9.1f} {ours / peer:6.2f}  {', '.join(uses)}{flag}", flush=True)
        total[0] += ours; total[1] += peer
print(f"sum of distinct layers: ours {total[0]:.1f} us, cuDNN {total[1]:.1f} us, ratio {total[0] / max(total[1], 1e-9):.2f}")
