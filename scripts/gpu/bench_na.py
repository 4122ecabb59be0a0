# Run on the GPU machine: fused BN-inference + ReLU (NA), conflux vs PyTorch eager
# (relu_(batch_norm(x, training=False))), same GPU, same run, medians of per-launch event
# times with a cold L2 on both sides. Floor = read x + write y at the measured copy rate
# (of a 2 GiB buffer); "copy" = a device copy of x's bytes timed the same way: what this
# size allows (launch and ramp weigh on the small tensors).
# Usage: python3 bench_na.py LIST
import math, subprocess, sys, os, torch
import torch.nn.functional as F
from triton.testing import do_bench

lst = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
cfgs = [l.strip() for l in open(lst) if l.strip() and not l.startswith("#")]
# Device-to-device copy bandwidth, measured here (bytes read + written).
big = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(big)
t_copy = do_bench(lambda: dst.copy_(big), warmup=25, rep=100, return_mode="median") * 1e-3
bw = 2 * big.numel() / t_copy
del big, dst
print(f"copy bandwidth {bw/1e12:.2f} TB/s")
rows = []
for prec, dt, cdt in [("fp32", torch.float32, "f32"), ("fp16", torch.float16, "f16")]:
    for mode in ["spatial", "peract"]:
        res = subprocess.run([os.path.join(here, "ex", "bench_na"), lst, cdt, "nchw", mode, "50"], capture_output=True, text=True)
        if res.returncode != 0:
            print("conflux bench failed:", res.stderr[-2000:]); sys.exit(1)
        ours = {l.split(",")[0]: float(l.split(",")[4]) for l in res.stdout.splitlines()}
        for cfg in cfgs:
            N, C, H, W = map(int, cfg.split("-"))
            x = torch.randn(N, C, H, W, device="cuda", dtype=dt)
            if mode == "spatial":
                m, v, g, b = [torch.rand(C, device="cuda", dtype=dt) + 0.5 for _ in range(4)]
                fn = lambda: F.relu_(F.batch_norm(x, m, v, g, b, False, 0.1, 1e-5))
            else:  # per-activation: PyTorch has no such mode; eager elementwise ops
                m, v, g, b = [torch.rand(1, C, H, W, device="cuda", dtype=dt) + 0.5 for _ in range(4)]
                fn = lambda: F.relu_((x - m) * (g / torch.sqrt(v + 1e-5)) + b)
            t = do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
            y = torch.empty_like(x)
            copy = do_bench(lambda: y.copy_(x), warmup=25, rep=100, return_mode="median") * 1e3
            floor = 2 * x.numel() * x.element_size() / bw * 1e6
            us = ours[cfg]
            rows.append((prec, mode, cfg, t, us, floor, copy))
            print(f"NA {prec} {mode:7s} {cfg:16s} torch {t:8.1f}us conflux {us:8.1f}us speedup {t/us:5.2f} floor {floor:7.1f}us conflux BW {floor/us*100:5.1f}% of copy; same-size copy {copy:7.1f}us ({copy/us*100:5.1f}%)", flush=True)
            del x, y
print()
print("| precision | BN mode | N-C-H-W | PyTorch eager (us) | conflux fused (us) | speedup | floor (us) | conflux % of copy BW | same-size copy (us) | conflux % of same-size copy |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.1f} | {r[3]/r[4]:.2f} | {r[5]:.1f} | {r[5]/r[4]*100:.0f}% | {r[6]:.1f} | {r[6]/r[4]*100:.0f}% |")
