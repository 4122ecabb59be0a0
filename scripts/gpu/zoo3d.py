"""3-D model zoo: every distinct Conv3d of torchvision's video networks (bench/zoo3d.txt), run
as a fused conv + bias + ReLU plan through conflux's C API, against the faster of cuDNN's fused
conv + bias + ReLU and PyTorch eager (conv3d, then bias + ReLU), same GPU, same run, same
timing (`do_bench` medians), as zoo.py does for 2-D layers.

usage: python3 zoo3d.py --list zoo3d.txt [--n 8] [--prec fp16|bf16|fp32]
List lines: N-C-D-H-W-K-fd-fy-fx-pd-py-px-sd-sy-sx-g-dd-dy-dx  # model xcount (N is overridden).
16-bit runs are channels-last (NDHWC), fp32 channels-first (NCDHW), strict f32 on both sides.
"""
import argparse, collections, math, time
import torch, torch.nn.functional as F
from triton.testing import do_bench
from miopen_ctypes import MIOpen, MIOpenError, FLOAT, HALF, BF16, find_lib
from zoo_common import conv_desc_nd, read_list

ap = argparse.ArgumentParser()
ap.add_argument("--list", default="zoo3d.txt")
ap.add_argument("--n", type=int, default=8)
ap.add_argument("--prec", default="fp16")
ap.add_argument("--models", default="", help="comma-separated subset")
a = ap.parse_args()

models = collections.OrderedDict()
for v, model, cnt in read_list(a.list, a.n):
    if not a.models or model in a.models.split(","):
        models.setdefault(model, collections.Counter())[v] += cnt

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
mio = MIOpen(find_lib(), torch.cuda.current_stream().cuda_stream)
DT = {"fp32": (torch.float32, FLOAT, 1e-4), "fp16": (torch.float16, HALF, 1e-2), "bf16": (torch.bfloat16, BF16, 2e-2)}
tdt, code, tol = DT[a.prec]
fmt = torch.contiguous_format if a.prec == "fp32" else torch.channels_last_3d
bench = lambda f: do_bench(f, warmup=10, rep=40, return_mode="median") * 1e3
cache = {}


def measure(cfg):
    if cfg in cache:
        return cache[cfg]
    N, Ci, D, H, W, K, fd, fy, fx, pd, py, px, sd, sy, sx, g, dd, dy, dx = cfg
    pad, st, dil = (pd, py, px), (sd, sy, sx), (dd, dy, dx)
    x = torch.randn(N, Ci, D, H, W, device="cuda", dtype=tdt).to(memory_format=fmt)
    w = (torch.randn(K, Ci // g, fd, fy, fx, device="cuda", dtype=tdt) / math.sqrt(Ci // g * fd * fy * fx)).to(memory_format=fmt)
    b = torch.randn(K, device="cuda", dtype=tdt)
    r = {}
    with torch.no_grad():
        ref = F.relu(F.conv3d(x.float(), w.float(), b.float(), st, pad, dil, g))
    y = torch.full(ref.shape, float("nan"), device="cuda", dtype=tdt).to(memory_format=fmt)
    try:
        xd, wd, yd = mio.tensor(x, code), mio.tensor(w, code), mio.tensor(y, code)
        bd = mio.tensor(b.view(1, K, 1, 1, 1), code)
        cd = conv_desc_nd(mio.lib, pad, st, dil, g)
        t0 = time.perf_counter()
        plan, args, ops = mio.cba_plan(xd, wd, bd, cd)
        r["compile_ms"] = (time.perf_counter() - t0) * 1e3
        mio.set_cba_args(args, ops, w, b)
        run = lambda: mio.execute(plan, xd, x, yd, y, args)
        run(); torch.cuda.synchronize()
        err = ((y.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        r["ok"] = bool(err < tol) and not torch.isnan(y).any().item()
        r["err"] = err
        r["ours"] = bench(run)
    except MIOpenError as e:
        r["ok"], r["fail"] = False, str(e)[:160]
    try:
        r["cudnn"] = bench(lambda: torch.cudnn_convolution_relu(x, w, b, st, pad, dil, g))
    except Exception:
        r["cudnn"] = float("inf")
    r["eager"] = bench(lambda: F.relu_(F.conv3d(x, w, b, st, pad, dil, g)))
    r["peer"] = min(r["cudnn"], r["eager"])
    del x, w, b, y, ref
    torch.cuda.empty_cache()
    cache[cfg] = r
    return r


print(f"3-D zoo prec={a.prec} N={a.n} {torch.cuda.get_device_name()}")
allr, nfail = [], 0
for name, seen in models.items():
    so = sp = 0.0
    rows = []
    for cfg, cnt in seen.items():
        r = measure(cfg)
        tag = "-".join(map(str, cfg))
        if not r.get("ok"):
            nfail += 1
            print(f"FAIL {name} {tag} {r.get('fail', 'err=%.1e' % r.get('err', float('nan')))}", flush=True)
            continue
        ratio = r["ours"] / r["peer"]
        allr.append(ratio)
        so += cnt * r["ours"]; sp += cnt * r["peer"]
        rows.append((ratio, tag, cnt, r["ours"], r["peer"], r["compile_ms"]))
    rows.sort(reverse=True)
    print(f"MODEL {name:14s} layers={len(seen):3d} conv-time ours/best-peer = {so / sp if sp else float('nan'):.2f} "
          f"(ours {so:9.1f}us, peer {sp:9.1f}us)", flush=True)
    for wr in rows[:5]:
        print(f"   worst {wr[0]:6.2f}  {wr[1]:48s} x{wr[2]} ours={wr[3]:8.1f}us peer={wr[4]:8.1f}us compile={wr[5]:.0f}ms", flush=True)
if allr:
    gm = math.exp(sum(map(math.log, allr)) / len(allr))
    print(f"GEOMEAN per-layer ours/best-peer = {gm:.2f} over {len(allr)} layers; >1.25: {sum(r > 1.25 for r in allr)}")
print(f"{len(allr)} passed, {nfail} failed")
