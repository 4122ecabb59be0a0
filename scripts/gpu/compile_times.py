"""Cold compile time of fused conv + bias + ReLU plans (issue 29, item 8): for every distinct
layer of a zoo list, the wall time of miopenCompileFusionPlan and of the first execute, with
an empty kernel cache, through the C API as a framework calls it. Optionally also the first
forward Find of each layer (it compiles every applicable solver).

usage (in .gpu/): MIOPEN_LIB_PATH=$PWD/lib/libMIOpen.so python3 compile_times.py \
        --list zoo_public.txt --n 32 --prec fp16 [--find] [--limit K]
The cache directory is made fresh unless CONFLUX_CACHE_DIR is already set (then warm runs can
be measured too). Run with CONFLUX_LOG=compile to see each module's own time on stderr; the
script writes `== layer` markers there so the lines can be attributed to plans.
"""
import argparse
import ctypes as C
import os
import sys
import tempfile
import time

if "CONFLUX_CACHE_DIR" not in os.environ:
    os.environ["CONFLUX_CACHE_DIR"] = tempfile.mkdtemp(prefix="conflux-cold-")

import torch
from miopen_ctypes import MIOpen, MIOpenError, FLOAT, HALF, BF16, P, find_lib
from zoo_common import read_list, Perf

ap = argparse.ArgumentParser()
ap.add_argument("--list", required=True)
ap.add_argument("--n", type=int, default=32)
ap.add_argument("--prec", default="fp16")
ap.add_argument("--find", action="store_true", help="also time the first forward Find of each layer")
ap.add_argument("--limit", type=int, default=0, help="only the first K distinct layers")
a = ap.parse_args()

tdt, code = {"fp32": (torch.float32, FLOAT), "fp16": (torch.float16, HALF), "bf16": (torch.bfloat16, BF16)}[a.prec]
fmt = torch.contiguous_format if a.prec == "fp32" else torch.channels_last
mio = MIOpen(find_lib(), torch.cuda.current_stream().cuda_stream)

layers = {}
for cfg, model, cnt in read_list(a.list, a.n):
    layers.setdefault(cfg, []).append(model)
cfgs = list(layers)[: a.limit or None]
print(f"prec={a.prec} N={a.n} {torch.cuda.get_device_name()} cache={os.environ['CONFLUX_CACHE_DIR']}")

rows = []
for cfg in cfgs:
    N, Cin, H, W, K, fy, fx, py, px, sy, sx, g, dy, dx = cfg
    tag = "-".join(map(str, cfg))
    x = torch.randn(N, Cin, H, W, device="cuda", dtype=tdt).to(memory_format=fmt)
    w = torch.randn(K, Cin // g, fy, fx, device="cuda", dtype=tdt).to(memory_format=fmt)
    b = torch.randn(K, device="cuda", dtype=tdt)
    Ho, Wo = (H + 2 * py - dy * (fy - 1) - 1) // sy + 1, (W + 2 * px - dx * (fx - 1) - 1) // sx + 1
    y = torch.empty(N, K, Ho, Wo, device="cuda", dtype=tdt).to(memory_format=fmt)
    print(f"== {tag}", file=sys.stderr, flush=True)
    r = {"tag": tag, "models": ",".join(sorted(set(layers[cfg])))}
    try:
        xd, wd, yd = mio.tensor(x, code), mio.tensor(w, code), mio.tensor(y, code)
        bd = mio.tensor(b.view(1, K, 1, 1), code)
        cd = mio.conv_desc((py, px), (sy, sx), (dy, dx), g)
        t0 = time.perf_counter()
        plan, args, ops = mio.cba_plan(xd, wd, bd, cd)
        r["compile"] = (time.perf_counter() - t0) * 1e3
        mio.set_cba_args(args, ops, w, b)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        mio.execute(plan, xd, x, yd, y, args)
        torch.cuda.synchronize()
        r["first"] = (time.perf_counter() - t0) * 1e3
        if a.find:
            L = mio.lib
            ws = C.c_size_t(0)
            L.miopenConvolutionForwardGetWorkSpaceSize(mio.h, wd, xd, cd, yd, C.byref(ws))
            wsb = torch.empty(max(ws.value, 1), dtype=torch.uint8, device="cuda")
            perf, n = Perf(), C.c_int(0)
            t0 = time.perf_counter()
            L.miopenFindConvolutionForwardAlgorithm(mio.h, xd, P(x.data_ptr()), wd, P(w.data_ptr()), cd, yd, P(y.data_ptr()),
                                                    1, C.byref(n), C.byref(perf), P(wsb.data_ptr()), C.c_size_t(ws.value), False)
            torch.cuda.synchronize()
            r["find"] = (time.perf_counter() - t0) * 1e3
    except MIOpenError as e:
        r["fail"] = str(e)[:100]
    rows.append(r)
    extra = f" find={r['find']:7.1f}" if "find" in r else ""
    print(f"{tag:42s} compile={r.get('compile', float('nan')):7.1f} ms first-exec={r.get('first', float('nan')):6.1f} ms{extra}"
          f" {r['models']} {r.get('fail', '')}", flush=True)

ok = sorted(r["compile"] for r in rows[1:] if "compile" in r)  # the first pays process start-up
if ok:
    q = lambda f: ok[min(len(ok) - 1, int(f * len(ok)))]
    print(f"\nplans {len(ok)} (after the first): median {q(0.5):.0f} ms, p90 {q(0.9):.0f} ms, max {ok[-1]:.0f} ms, "
          f"over 300 ms: {sum(v > 300 for v in ok)}, total {sum(ok) / 1e3:.1f} s; first plan {rows[0].get('compile', 0):.0f} ms")
    by_model = {}
    for r in rows:
        for m in r["models"].split(","):
            by_model[m] = by_model.get(m, 0.0) + r.get("compile", 0.0)
    print("per model (distinct layers, serial):", ", ".join(f"{m} {v / 1e3:.1f} s" for m, v in sorted(by_model.items())))
    if a.find:
        fs = sorted(r["find"] for r in rows if "find" in r)
        print(f"find: median {fs[len(fs) // 2]:.0f} ms, max {fs[-1]:.0f} ms, total {sum(fs) / 1e3:.1f} s")
