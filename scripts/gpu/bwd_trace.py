"""What a backward convolution's timed interval holds, ours against cuDNN: per model, every layer
timed as ../shared/bench/zoo_bwd.py times it (Find, then the chosen algorithm; do_bench medians;
checked against torch.ops.aten.convolution_backward), then for each model's --top layers by gap
contribution (count x (ours - cuDNN)) per direction, one call of each side under the torch
profiler: every kernel, memset and copy with its start offset and duration. Kernels that sum
to far less than the timed interval mean launch gaps or host time; one kernel near it means the
kernel itself.

usage: python3 bwd_trace.py --list zoo_public.txt [--models resnet50] [--n 32] [--prec fp16]
                            [--dir both] [--top 3] [--layers dx:32-256-28-28-256-3-3-1-1-2-2-1-1-1,...]
--layers skips the timing pass and traces the named layers only.
"""
import argparse, collections, math
import torch
from triton.testing import do_bench
from miopen_ctypes import MIOpen, MIOpenError, FLOAT, HALF, BF16, find_lib
from zoo_common import backward_runner, read_list, timed_trace

ap = argparse.ArgumentParser()
ap.add_argument("--list", default="zoo_public.txt")
ap.add_argument("--models", default="")
ap.add_argument("--dir", default="both", choices=["dx", "dw", "both"])
ap.add_argument("--n", type=int, default=32)
ap.add_argument("--prec", default="fp16")
ap.add_argument("--top", type=int, default=3)
ap.add_argument("--layers", default="")
a = ap.parse_args()

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
mio = MIOpen(find_lib(), torch.cuda.current_stream().cuda_stream)
tdt, code, tol = {"fp32": (torch.float32, FLOAT, 1e-4), "fp16": (torch.float16, HALF, 1e-2), "bf16": (torch.bfloat16, BF16, 2e-2)}[a.prec]
fmt = torch.contiguous_format if a.prec == "fp32" else torch.channels_last
bench = lambda f: do_bench(f, warmup=10, rep=40, return_mode="median") * 1e3
dirs = ["dx", "dw"] if a.dir == "both" else [a.dir]


def sides(cfg, kind):
    """(ours, cuDNN, check) calls of one layer and direction; ours is None where conflux refuses."""
    N, Cc, H, W, K, fy, fx, py, px, sy, sx, g, dy_, dx_ = cfg
    x = torch.randn(N, Cc, H, W, device="cuda", dtype=tdt).to(memory_format=fmt)
    w = (torch.randn(K, Cc // g, fy, fx, device="cuda", dtype=tdt) / math.sqrt(Cc // g * fy * fx)).to(memory_format=fmt)
    gy = torch.randn_like(torch.nn.functional.conv2d(x, w, None, (sy, sx), (py, px), (dy_, dx_), g))
    mask = [kind == "dx", kind == "dw", False]
    peer = lambda: torch.ops.aten.convolution_backward(gy, x, w, None, [sy, sx], [py, px], [dy_, dx_], False, [0, 0], g, mask)
    ref = peer()[0 if kind == "dx" else 1]
    out = torch.full_like(x if kind == "dx" else w, float("nan"))
    xd, wd, yd, od = mio.tensor(x, code), mio.tensor(w, code), mio.tensor(gy, code), mio.tensor(out, code)
    try:
        ours = backward_runner(mio, kind, yd, gy, wd, w, xd, x, mio.conv_desc((py, px), (sy, sx), (dy_, dx_), g), od, out)
    except MIOpenError as e:
        print(f"conflux refused {kind} {cfg}: {e}")
        ours = None

    def check():
        out.fill_(float("nan"))
        ours()
        torch.cuda.synchronize()
        err = ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()
        return err < tol * (2 if kind == "dw" else 1) and not torch.isnan(out).any().item()
    return ours, peer, check, (x, w, gy, out)


def trace(cfg, kind):
    ours, peer, check, keep = sides(cfg, kind)
    print(f"== {kind} {'-'.join(map(str, cfg))}")
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for side, f in (("conflux", ours), ("cudnn", peer)):
        if not f:
            continue
        median, acts = timed_trace(f, flush)
        print(f"   {side:8s} median {median:8.1f} us, activities {sum(us for _, _, us in acts):8.1f} us", flush=True)
        for name, at, us in acts:
            print(f"      +{at:8.1f} {us:8.1f} us  {name[:110]}")
    if ours and not check():
        print("   CHECK FAILED")
    del keep
    torch.cuda.empty_cache()


if a.layers:
    for item in a.layers.split(","):
        kind, cfg = item.split(":")
        trace(tuple(map(int, cfg.split("-"))), kind)
    raise SystemExit

models = collections.OrderedDict()
for cfg, model, cnt in read_list(a.list, a.n):
    if not a.models or model in a.models.split(","):
        models.setdefault(model, collections.Counter())[cfg] += cnt
print(f"prec={a.prec} N={a.n} {torch.cuda.get_device_name()}")
timed, picked = {}, []
for model, seen in models.items():
    for kind in dirs:
        rows = []
        for cfg, cnt in seen.items():
            if (cfg, kind) not in timed:
                ours, peer, check, keep = sides(cfg, kind)
                ok = ours is not None and check()
                timed[cfg, kind] = (bench(ours) if ok else float("inf"), bench(peer))
                del keep
                torch.cuda.empty_cache()
            o, p = timed[cfg, kind]
            rows.append((cnt * (o - p), cfg, cnt, o, p))
        so, sp = sum(r[2] * r[3] for r in rows), sum(r[2] * r[4] for r in rows)
        print(f"MODEL {model:22s} {kind} ours/cuDNN = {so / sp:.2f} (ours {so:9.1f} us, cuDNN {sp:9.1f} us)", flush=True)
        for gap, cfg, cnt, o, p in sorted(rows, reverse=True)[:a.top]:
            print(f"   top {'-'.join(map(str, cfg)):40s} x{cnt} ours={o:8.1f} cudnn={p:8.1f} ratio {o / p:5.2f}")
            if gap > 0 and (cfg, kind) not in picked:
                picked.append((cfg, kind))
for cfg, kind in picked:
    trace(cfg, kind)
