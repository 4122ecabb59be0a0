"""Training-side check of 3-D convolutions (zoo3d.txt): conflux backward-data and
backward-weights (C API: Find, then the chosen algorithm) against cuDNN through
torch.ops.aten.convolution_backward, per model (Σ over distinct layers × count), same GPU, same
run, do_bench medians; zoo_bwd.py's method over Conv3d layers (NDHWC for 16-bit types).

usage: python3 zoo3d_bwd.py --list zoo3d.txt --models r3d_18,r2plus1d_18 [--n 8] [--prec fp16]
"""
import argparse, collections, math
import torch
from triton.testing import do_bench
from miopen_ctypes import MIOpen, MIOpenError, FLOAT, HALF, BF16, find_lib
from zoo_common import backward_runner, conv_desc_nd, read_list

ap = argparse.ArgumentParser()
ap.add_argument("--list", required=True)
ap.add_argument("--models", default="")
ap.add_argument("--n", type=int, default=8)
ap.add_argument("--prec", default="fp16")
a = ap.parse_args()
want = set(filter(None, a.models.split(",")))
models = collections.OrderedDict()
for v, name, cnt in read_list(a.list, a.n):
    if not want or name in want:
        models.setdefault(name, collections.Counter())[v] += cnt

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
mio = MIOpen(find_lib(), torch.cuda.current_stream().cuda_stream)
L = mio.lib
DT = {"fp32": (torch.float32, FLOAT, 1e-4), "fp16": (torch.float16, HALF, 1e-2), "bf16": (torch.bfloat16, BF16, 2e-2)}
tdt, code, tol = DT[a.prec]
fmt = torch.contiguous_format if a.prec == "fp32" else torch.channels_last_3d


bench = lambda f: do_bench(f, warmup=10, rep=40, return_mode="median") * 1e3
cache = {}


def measure(cfg):
    if cfg in cache:
        return cache[cfg]
    N, Cc, D, H, W, K, fd, fy, fx, pd, py, px, sd, sy, sx, g, dd, dy_, dx_ = cfg
    pad, st, dil = [pd, py, px], [sd, sy, sx], [dd, dy_, dx_]
    x = torch.randn(N, Cc, D, H, W, device="cuda", dtype=tdt).to(memory_format=fmt)
    w = (torch.randn(K, Cc // g, fd, fy, fx, device="cuda", dtype=tdt) / math.sqrt(Cc // g * fd * fy * fx)).to(memory_format=fmt)
    y = torch.nn.functional.conv3d(x, w, None, st, pad, dil, g)
    gy = torch.randn_like(y)
    r = {}
    cb = lambda m: torch.ops.aten.convolution_backward(gy, x, w, None, st, pad, dil, False, [0, 0, 0], g, m)
    ref_dx, ref_dw, _ = cb([True, True, False])
    r["peer_dx"] = bench(lambda: cb([True, False, False]))
    r["peer_dw"] = bench(lambda: cb([False, True, False]))
    xd, wd, yd = mio.tensor(x, code), mio.tensor(w, code), mio.tensor(gy, code)
    cd = conv_desc_nd(L, pad, st, dil, g)
    for kind in ("dx", "dw"):
        out = torch.full_like(x if kind == "dx" else w, float("nan"))
        try:
            run = backward_runner(mio, kind, yd, gy, wd, w, xd, x, cd, mio.tensor(out, code), out)
            out.fill_(float("nan")); run(); torch.cuda.synchronize()
            ref = ref_dx if kind == "dx" else ref_dw
            err = ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()
            r[kind + "_ok"] = err < (tol * (2 if kind == "dw" else 1)) and not torch.isnan(out).any().item()
            r[kind + "_err"] = err
            r[kind] = bench(run)
        except MIOpenError as e:
            r[kind + "_ok"] = False
            r[kind + "_fail"] = str(e)[:100]
    del x, w, y, gy, ref_dx, ref_dw
    torch.cuda.empty_cache()
    cache[cfg] = r
    return r


print(f"prec={a.prec} N={a.n} {torch.cuda.get_device_name()}")
nok = nfail = 0
for name, seen in models.items():
    s = {"dx": [0.0, 0.0], "dw": [0.0, 0.0]}
    worst = []
    for cfg, cnt in seen.items():
        r = measure(cfg)
        tag = "-".join(map(str, cfg))
        for k in ("dx", "dw"):
            if not r.get(k + "_ok"):
                nfail += 1
                print(f"FAIL {name} {k} {tag} {r.get(k + '_fail', 'err=%.1e' % r.get(k + '_err', float('nan')))}", flush=True)
                continue
            nok += 1
            s[k][0] += cnt * r[k]; s[k][1] += cnt * r["peer_" + k]
            worst.append((r[k] / r["peer_" + k], k, tag, r[k], r["peer_" + k]))
    worst.sort(reverse=True)
    print(f"MODEL {name:20s} bwd-data ours/cuDNN = {s['dx'][0] / max(s['dx'][1], 1e-9):.2f}   bwd-weights ours/cuDNN = {s['dw'][0] / max(s['dw'][1], 1e-9):.2f}", flush=True)
    for wr in worst[:3]:
        print(f"   worst {wr[0]:6.2f} {wr[1]} {wr[2]:48s} ours={wr[3]:8.1f}us cudnn={wr[4]:8.1f}us", flush=True)
print(f"{nok} passed, {nfail} failed")
