"""Per-layer table of fused conv + bias + ReLU through libMIOpen.so against the faster of
cuDNN's fused call and PyTorch eager, timed as ../shared/bench/zoo.py times them (do_bench
medians, same run), for the layers of a zoo list that a filter keeps. zoo.py prints per-model
sums and the four worst layers; this prints every layer, for A/B runs of one kernel family
(e.g. with CONFLUX_DISABLE_SOLVERS set, then without).

usage: python3 layer_table.py --list zoo_public.txt [--models resnext50_32x4d] [--grouped]
                              [--max-c 4] [--n 32] [--prec fp16]
Needs miopen_ctypes.py (staged beside it by build.sh) and MIOPEN_LIB_PATH or .gpu/lib.
"""
import argparse, collections, math, time
import torch, torch.nn.functional as F
from triton.testing import do_bench
from miopen_ctypes import MIOpen, MIOpenError, FLOAT, HALF, BF16, find_lib
from zoo_common import read_list

ap = argparse.ArgumentParser()
ap.add_argument("--list", required=True)
ap.add_argument("--models", default="")
ap.add_argument("--grouped", action="store_true", help="only layers with groups > 1")
ap.add_argument("--min-cg", type=int, default=1, help="only layers with at least this many input channels per group")
ap.add_argument("--max-c", type=int, default=1 << 30, help="only layers with at most this many input channels (stems)")
ap.add_argument("--filter-size", default="", help="only layers with this filter, e.g. 1x1")
ap.add_argument("--n", type=int, default=32)
ap.add_argument("--prec", default="fp16")
ap.add_argument("--host", action="store_true", help="also print each side's host time per call (wall time of calls queued without waiting)")
a = ap.parse_args()

layers = collections.OrderedDict()
for v, model, cnt in read_list(a.list, a.n):
    if a.models and model not in a.models.split(","):
        continue
    if a.grouped and v[11] == 1 or v[1] // v[11] < a.min_cg or v[1] > a.max_c or a.filter_size and f"{v[5]}x{v[6]}" != a.filter_size:
        continue
    layers.setdefault(v, []).append(f"{model} x{cnt}")

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
DT = {"fp32": (torch.float32, FLOAT, 1e-4), "fp16": (torch.float16, HALF, 1e-2), "bf16": (torch.bfloat16, BF16, 2e-2)}
tdt, code, tol = DT[a.prec]
fmt = torch.contiguous_format if a.prec == "fp32" else torch.channels_last
mio = MIOpen(find_lib(), torch.cuda.current_stream().cuda_stream)
bench = lambda f: do_bench(f, warmup=10, rep=40, return_mode="median") * 1e3


def host_us(f, calls=50):
    """Host time of one call: calls queued back to back without waiting, fewer than the
    launch queue holds, so the wall time is the host's alone."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        f()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6

print(f"prec={a.prec} N={a.n} {torch.cuda.get_device_name()}")
print(f"{'layer':42s} {'ours us':>9s} {'peer us':>9s} {'ratio':>6s}  uses")
ratios = []
per_model = collections.defaultdict(lambda: [0.0, 0.0])
for cfg, uses in layers.items():
    N, C, H, W, K, fy, fx, py, px, sy, sx, g, dy, dx = cfg
    x = torch.randn(N, C, H, W, device="cuda", dtype=tdt).to(memory_format=fmt)
    w = (torch.randn(K, C // g, fy, fx, device="cuda", dtype=tdt) / math.sqrt(C // g * fy * fx)).to(memory_format=fmt)
    b = torch.randn(K, device="cuda", dtype=tdt)
    with torch.no_grad():
        ref = F.relu(F.conv2d(x.float(), w.float(), b.float(), (sy, sx), (py, px), (dy, dx), g))
    y = torch.full(ref.shape, float("nan"), device="cuda", dtype=tdt).to(memory_format=fmt)
    tag = "-".join(map(str, cfg))
    try:
        xd, wd, yd = mio.tensor(x, code), mio.tensor(w, code), mio.tensor(y, code)
        bd = mio.tensor(b.view(1, K, 1, 1), code)
        plan, args, ops = mio.cba_plan(xd, wd, bd, mio.conv_desc((py, px), (sy, sx), (dy, dx), g))
        mio.set_cba_args(args, ops, w, b)
        run = lambda: mio.execute(plan, xd, x, yd, y, args)
        run()
        torch.cuda.synchronize()
        err = ((y.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        if not err < tol or torch.isnan(y).any().item():
            print(f"FAIL {tag} err={err:.1e}")
            continue
        ours = bench(run)
    except MIOpenError as e:
        print(f"FAIL {tag} {str(e)[:100]}")
        continue
    try:
        cudnn = bench(lambda: torch.cudnn_convolution_relu(x, w, b, (sy, sx), (py, px), (dy, dx), g))
    except Exception:
        cudnn = float("inf")
    eager = bench(lambda: F.relu_(F.conv2d(x, w, b, (sy, sx), (py, px), (dy, dx), g)))
    peer = min(cudnn, eager)
    ratios.append(ours / peer)
    for use in uses:
        model, cnt = use.split()[0], int(use.split()[1].lstrip("x"))
        per_model[model][0] += cnt * ours
        per_model[model][1] += cnt * peer
    host = ""
    if a.host:
        peer_call = (lambda: torch.cudnn_convolution_relu(x, w, b, (sy, sx), (py, px), (dy, dx), g)) if cudnn <= eager else (lambda: F.relu_(F.conv2d(x, w, b, (sy, sx), (py, px), (dy, dx), g)))
        host = f" host {host_us(run):6.1f} / {host_us(peer_call):6.1f}"
    print(f"{tag:42s} {ours:9.1f} {peer:9.1f} {ours / peer:6.2f}{host}  {', '.join(uses)}", flush=True)
if ratios:
    print(f"geomean ours/peer {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f} over {len(ratios)} layers")
for model, (ours, peer) in per_model.items():
    print(f"model {model}: ours {ours:.1f} us, peer {peer:.1f} us, ratio {ours / peer:.2f} (layers that ran)")
