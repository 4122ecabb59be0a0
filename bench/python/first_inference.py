#!/usr/bin/env python3
"""Time to first inference of a fused torchvision model: `fuse(model, example_input=x,
tune=False)` (every plan compiled, several at once) plus the first call, then the first call
at another batch size. Run it twice on one machine: cold kernel cache, then warm.

    CONFLUX_CACHE_DIR=/tmp/c python3 bench/python/first_inference.py --model resnet50 --batch 32 --other 8
"""

import argparse
import time

import torch
import torchvision

import conflux.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--other", type=int, default=8)
    args = ap.parse_args()
    fmt = torch.channels_last
    model = getattr(torchvision.models, args.model)().eval().cuda().half().to(memory_format=fmt)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda").half().to(memory_format=fmt)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fused = conflux.torch.fuse(model, example_input=x, tune=False)
    with torch.no_grad():
        fused(x)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    with torch.no_grad():
        fused(x[: args.other].contiguous(memory_format=fmt))
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    print(f"{args.model} N={args.batch}: fuse + compile + first call {t1 - t0:.2f} s; then N={args.other} first call {t2 - t1:.2f} s; plans {conflux.plan_count()}")


if __name__ == "__main__":
    main()
