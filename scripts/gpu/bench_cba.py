# Run on the GPU machine: fused conv+bias+ReLU, conflux vs cuDNN (torch.cudnn_convolution_relu),
# same GPU, same run, both timed as the median of per-launch CUDA-event times with a cold L2
# (triton's do_bench flushes L2 for cuDNN; the conflux bench program does the same).
# Usage: python3 bench_cba.py LIST N [precisions...]   (precisions: fp32 fp32nhwc fp16 bf16 fp16nchw tf32 tf32nchw)
# fp32* are strict on both sides (TF32 off; conflux multiplies split TF32 parts, f32 accuracy); tf32* allow TF32 on both sides (conflux: the
# descriptor's ALLOW_TF32 attribute; cuDNN: torch.backends.cudnn.allow_tf32).
import math, subprocess, sys, os, torch
from bench_spec import SPEC
from triton.testing import do_bench

lst, N = sys.argv[1], int(sys.argv[2])
precs = sys.argv[3:] or ["fp32", "fp16", "bf16"]
cfgs = [l.strip() for l in open(lst) if l.strip() and not l.startswith("#")]
here = os.path.dirname(os.path.abspath(__file__))
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
rows = []
for prec in precs:
    dtn, cl, cdt, clay = SPEC[prec]
    dt = getattr(torch, dtn)
    torch.backends.cudnn.allow_tf32 = cdt == "tf32"
    res = subprocess.run([os.path.join(here, "ex", "bench_cba"), lst, str(N), cdt, clay, "50"], capture_output=True, text=True)
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
        w = (torch.randn(K, C, fy, fx, device="cuda", dtype=dt) / math.sqrt(C * fy * fx)).to(memory_format=fmt)
        b = torch.randn(K, device="cuda", dtype=dt)
        fn = lambda: torch.cudnn_convolution_relu(x, w, b, (1, 1), (py, px), (1, 1), 1)
        t = do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
        us, solver = ours[cfg]
        rows.append((prec, cfg, t, us, us / t, solver))
        print(f"{prec:9s} {cfg:24s} cudnn {t:9.1f}us  conflux {us:9.1f}us  ratio {us/t:6.2f}  {solver}", flush=True)
        del x, w, b
print()
print("| precision | config C-H-W-K-fy-fx-py-px | cuDNN fused (us) | conflux fused (us) | conflux/cuDNN | conflux solver |")
print("|---|---|---:|---:|---:|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.2f} | {r[5]} |")
for prec in precs:
    rs = [r[4] for r in rows if r[0] == prec]
    print(f"geomean conflux/cuDNN {prec} N={N}: {math.exp(sum(map(math.log, rs)) / len(rs)):.2f}")
