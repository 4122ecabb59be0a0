# Run on the GPU machine: convolution backward-data (or backward-weights with BWD=weights),
# conflux vs cuDNN (torch.ops.aten.convolution_backward with only grad_input, or only
# grad_weight, requested), same GPU, same run, both timed as the median of per-launch
# CUDA-event times with a cold L2.
# Usage: [BWD=weights] python3 bench_bwd.py LIST N [precisions...]   (fp16 bf16 fp16nchw fp32 fp32nhwc tf32 tf32nchw;
# fp32* strict on both sides, tf32* with TF32 allowed on both sides)
import math, subprocess, sys, os, torch
from bench_spec import SPEC
from triton.testing import do_bench

lst, N = sys.argv[1], int(sys.argv[2])
precs = sys.argv[3:] or ["fp16", "bf16"]
DIR = os.environ.get("BWD", "data")
MASK = [False, True, False] if DIR == "weights" else [True, False, False]
cfgs = [l.strip() for l in open(lst) if l.strip() and not l.startswith("#")]
here = os.path.dirname(os.path.abspath(__file__))
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
rows = []
for prec in precs:
    dtn, cl, cdt, clay = SPEC[prec]
    dt = getattr(torch, dtn)
    torch.backends.cudnn.allow_tf32 = cdt == "tf32"
    res = subprocess.run([os.path.join(here, "ex", "bench_bwd"), lst, str(N), cdt, clay, "30", DIR], capture_output=True, text=True)
    if res.returncode != 0:
        print("conflux bench failed:", res.stderr[-2000:]); sys.exit(1)
    ours = {}
    for line in res.stdout.splitlines():
        f = line.split(",")
        ours[f[0]] = (float(f[5]), f[4])
    for cfg in cfgs:
        C, H, W, K, fy, fx, py, px = map(int, cfg.split("-"))
        fmt = torch.channels_last if cl else torch.contiguous_format
        x = torch.randn(N, C, H, W, device="cuda", dtype=dt).to(memory_format=fmt)
        w = (torch.randn(K, C, fy, fx, device="cuda", dtype=dt) / math.sqrt(K * fy * fx)).to(memory_format=fmt)
        oh, ow = H + 2 * py - fy + 1, W + 2 * px - fx + 1
        dy = torch.randn(N, K, oh, ow, device="cuda", dtype=dt).to(memory_format=fmt)
        fn = lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [py, px], [1, 1], False, [0, 0], 1, MASK)
        t = do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
        us, solver = ours[cfg]
        rows.append((prec, cfg, t, us, us / t, solver))
        print(f"{prec:9s} {cfg:24s} cudnn {t:9.1f}us  conflux {us:9.1f}us  ratio {us/t:6.2f}  {solver}", flush=True)
        del x, w, dy
print()
print(f"| precision | config C-H-W-K-fy-fx-py-px | cuDNN bwd-{DIR} (us) | conflux bwd-{DIR} (us) | conflux/cuDNN | conflux solver |")
print("|---|---|---:|---:|---:|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.2f} | {r[5]} |")
for prec in precs:
    rs = [r[4] for r in rows if r[0] == prec]
    print(f"geomean conflux/cuDNN bwd-{DIR} {prec} N={N}: {math.exp(sum(map(math.log, rs)) / len(rs)):.2f}")
