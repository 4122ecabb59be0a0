"""Nsight Compute evidence for the model zoo: which layers keep a model above its peer, and what
their kernels (conflux's and the peer's, profiled in the same process) are limited by.

Run on the GPU machine from .gpu/ (zoo.py's conventions: fused conv + bias + ReLU through the C
API against the faster of cuDNN's fused conv+bias+ReLU and PyTorch eager):

  python3 zoo_ncu.py select --list zoo_public.txt --n 32 --prec fp16 --out sel.txt [--top 3]
      times every layer (do_bench medians, as zoo.py), prints per-model ratios, and writes, for
      each model above --above (1.0), its --top layers by gap contribution count x (ours - peer).
  ncu --profile-from-start off --csv --page details --print-details all \
      --section LaunchStats --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section ComputeWorkloadAnalysis python3 zoo_ncu.py profile --sel sel.txt --n 32 \
      --prec fp16 > raw.csv
      one profiled execution of each selected layer on each side, separated by marker kernels.
  python3 zoo_ncu.py trace --sel sel.txt --n 32 --prec fp16
      at full clocks (no replay): per selected layer and side, the median of CUDA-event-timed
      calls after an L2 flush (as do_bench) and the GPU activities of one call from the torch
      profiler (kernels, memsets, copies) with their start offsets: what the timed interval holds
      beyond the kernels ncu measured.
  python3 zoo_ncu.py table --sel sel.txt --raw raw.csv
      a markdown table: per layer and side, the kernels' time, grid, SM-active share, tensor-pipe
      share, DRAM and SM throughput, achieved occupancy and the top stalls.
"""
import argparse, collections, csv, io, math, sys

ap = argparse.ArgumentParser()
ap.add_argument("mode", choices=["select", "profile", "table", "trace"])
ap.add_argument("--list", default="zoo_public.txt")
ap.add_argument("--sel", default="sel.txt")
ap.add_argument("--out", default="sel.txt")
ap.add_argument("--raw", default="raw.csv")
ap.add_argument("--n", type=int, default=32)
ap.add_argument("--prec", default="fp16")
ap.add_argument("--top", type=int, default=3)
ap.add_argument("--above", type=float, default=1.0)
ap.add_argument("--models", default="")
a = ap.parse_args()


def read_selection(path):
    """(cfg tuple, model, count, ours us, peer us, peer name) per line of a selection file."""
    rows = []
    for line in open(path):
        cfg, _, tail = line.strip().partition("#")
        if not cfg.strip():
            continue
        t = tail.split()
        rows.append((tuple(map(int, cfg.split("-"))), t[0], int(t[1].lstrip("x")), float(t[2]), float(t[3]), t[4]))
    return rows


def layer(cfg, mio, tdt, code, fmt):
    """Tensors, a compiled fused plan (None when conflux refuses) and both peers for one layer."""
    import torch, torch.nn.functional as F
    from miopen_ctypes import MIOpenError
    N, C, H, W, K, fy, fx, py, px, sy, sx, g, dy, dx = cfg
    x = torch.randn(N, C, H, W, device="cuda", dtype=tdt).to(memory_format=fmt)
    w = (torch.randn(K, C // g, fy, fx, device="cuda", dtype=tdt) / math.sqrt(C // g * fy * fx)).to(memory_format=fmt)
    b = torch.randn(K, device="cuda", dtype=tdt)
    y = torch.full((N, K, (H + 2 * py - dy * (fy - 1) - 1) // sy + 1, (W + 2 * px - dx * (fx - 1) - 1) // sx + 1),
                   float("nan"), device="cuda", dtype=tdt).to(memory_format=fmt)
    ours = None
    try:
        xd, wd, yd = mio.tensor(x, code), mio.tensor(w, code), mio.tensor(y, code)
        plan, args, ops = mio.cba_plan(xd, wd, mio.tensor(b.view(1, K, 1, 1), code), mio.conv_desc((py, px), (sy, sx), (dy, dx), g))
        mio.set_cba_args(args, ops, w, b)
        ours = lambda: mio.execute(plan, xd, x, yd, y, args)
    except MIOpenError as e:
        print(f"conflux refused {cfg}: {e}", file=sys.stderr)
    cudnn = lambda: torch.cudnn_convolution_relu(x, w, b, (sy, sx), (py, px), (dy, dx), g)
    eager = lambda: F.relu_(F.conv2d(x, w, b, (sy, sx), (py, px), (dy, dx), g))
    return {"x": x, "w": w, "b": b, "y": y}, ours, {"cudnn": cudnn, "eager": eager}


def setup():
    import torch
    from miopen_ctypes import MIOpen, FLOAT, HALF, BF16, find_lib
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    mio = MIOpen(find_lib(), torch.cuda.current_stream().cuda_stream)
    tdt, code = {"fp32": (torch.float32, FLOAT), "fp16": (torch.float16, HALF), "bf16": (torch.bfloat16, BF16)}[a.prec]
    fmt = torch.contiguous_format if a.prec == "fp32" else torch.channels_last
    return mio, tdt, code, fmt


def select():
    import torch
    from triton.testing import do_bench
    from zoo_common import read_list
    mio, tdt, code, fmt = setup()
    bench = lambda f: do_bench(f, warmup=10, rep=40, return_mode="median") * 1e3
    models, cache = collections.OrderedDict(), {}
    wanted = set(a.models.split(",")) if a.models else None
    for cfg, model, cnt in read_list(a.list, a.n):
        if wanted is None or model in wanted:
            models.setdefault(model, collections.Counter())[cfg] += cnt
    print(f"prec={a.prec} N={a.n} {torch.cuda.get_device_name()}")
    with open(a.out, "w") as sel:
        for model, seen in models.items():
            rows = []
            for cfg, cnt in seen.items():
                if cfg not in cache:
                    _, ours, peers = layer(cfg, mio, tdt, code, fmt)
                    t = {k: bench(f) for k, f in peers.items() if _works(f)}
                    best = min(t, key=t.get)
                    cache[cfg] = (bench(ours) if ours else float("inf"), t[best], best)
                    torch.cuda.empty_cache()
                o, p, best = cache[cfg]
                rows.append((cnt * (o - p), cfg, cnt, o, p, best))
            so, sp = sum(r[2] * r[3] for r in rows), sum(r[2] * r[4] for r in rows)
            print(f"MODEL {model:22s} ours/peer = {so / sp:.2f} (ours {so:9.1f} us, peer {sp:9.1f} us)", flush=True)
            if so / sp <= a.above:
                continue
            for gap, cfg, cnt, o, p, best in sorted(rows, reverse=True)[:a.top]:
                if gap > 0:
                    tag = "-".join(map(str, cfg))
                    print(f"   top {tag:40s} x{cnt} ours={o:8.1f} peer={p:8.1f} ({best}) gap {gap / (so - sp) * 100 if so > sp else 0:.0f}%")
                    sel.write(f"{tag}  # {model} x{cnt} {o:.1f} {p:.1f} {best}\n")


def _works(f):
    try:
        f()
        return True
    except Exception:
        return False


def profile():
    import torch
    mio, tdt, code, fmt = setup()
    marker = lambda: torch.cuda._sleep(1000)
    for cfg, model, cnt, o, p, best in read_selection(a.sel):
        keep, ours, peers = layer(cfg, mio, tdt, code, fmt)
        sides = [f for f in (ours, peers[best]) if f]
        for f in sides * 3:
            f()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for f in (ours or (lambda: None), peers[best]):
            marker()
            f()
        marker()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        del keep
        torch.cuda.empty_cache()


def trace():
    import torch
    from zoo_common import timed_trace
    mio, tdt, code, fmt = setup()
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for cfg, model, cnt, o, p, best in read_selection(a.sel):
        keep, ours, peers = layer(cfg, mio, tdt, code, fmt)
        print(f"== {'-'.join(map(str, cfg))} ({model}, x{cnt}); zoo timing ours {o:.1f} peer {p:.1f} us ({best})")
        for side, f in (("conflux", ours), (best, peers[best])):
            if not f:
                continue
            median, acts = timed_trace(f, flush)
            acts = ", ".join(f"{name[:40]} +{at:.1f} {us:.1f}us" for name, at, us in acts)
            print(f"   {side:8s} event-timed median {median:8.1f} us | after the flush: {acts}", flush=True)
        del keep
        torch.cuda.empty_cache()


def num(m, key):
    try:
        return float(str(m.get(key, "nan")).replace(",", ""))
    except ValueError:
        return float("nan")


def table():
    text = "".join(l for l in open(a.raw) if l.startswith('"'))
    kernels = collections.OrderedDict()
    for row in csv.DictReader(io.StringIO(text)):
        k = kernels.setdefault(row["ID"], {"name": row["Kernel Name"], "grid": row["Grid Size"], "block": row["Block Size"]})
        k[row["Metric Name"]] = row["Metric Value"]
        if row["Metric Name"] == "Duration":
            scale = {"nsecond": 1e-3, "ns": 1e-3, "msecond": 1e3, "ms": 1e3}.get(row["Metric Unit"], 1.0)
            k["Duration"] = str(num(k, "Duration") * scale)
    # Split the launch sequence at the marker kernels.
    groups, cur = [], None
    for k in kernels.values():
        if "spin_kernel" in k["name"]:
            if cur is not None:
                groups.append(cur)
            cur = []
        elif cur is not None:
            cur.append(k)
    sel = read_selection(a.sel)
    print("| layer (model, count) | side | timed (us) | kernel | grid × block | ncu time (us) | SM active / elapsed | "
          "tensor pipe / active | DRAM % | SM % | achieved occupancy % | top stalls (warps per issued instr.) |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|")
    for i, (cfg, model, cnt, o, p, best) in enumerate(sel):
        tag = "-".join(map(str, cfg))
        pair = groups[3 * i:3 * i + 2]  # marker, ours, marker, peer, marker: an empty group between layers
        for side, timed, ks in zip(("conflux", best), (o, p), pair):
            for j, k in enumerate(ks):
                dur = num(k, "Duration")
                act, el = num(k, "SM Active Cycles"), num(k, "Elapsed Cycles")
                tens = [num(k, m) for m in k if "Tensor" in m and "Cycles Active" in m]
                stalls = sorted(((num(k, m), m) for m in k if m.startswith("Stall ")), reverse=True)[:3]
                top = ", ".join(f"{m[6:].lower()} {v:.2f}" for v, m in stalls if v == v)
                tp = f"{100 * max(tens) / (100 * act / el):.0f}%" if tens and el else "n/a"
                head = f"{tag} ({model}, x{cnt})" if side == "conflux" and j == 0 else ""
                print(f"| {head} | {side if j == 0 else ''} | {f'{timed:.1f}' if j == 0 else ''} | {k['name'][:48]} | "
                      f"{k['grid']} × {k['block']} | {dur:.1f} | {100 * act / el:.0f}% | {tp} | "
                      f"{num(k, 'DRAM Throughput'):.0f} | {num(k, 'Compute (SM) Throughput'):.0f} | "
                      f"{num(k, 'Achieved Occupancy'):.0f} | {top} |")


{"select": select, "profile": profile, "table": table, "trace": trace}[a.mode]()
