#!/usr/bin/env python3
"""Whole torchvision networks end to end: PyTorch eager vs the same model after
`conflux.torch.fuse` (and optionally `torch.compile`, default mode), same process, same
inputs, random weights, eval mode. Prints one table row per (model, batch) and JSON lines.

Timing: median wall time of `iters` forward calls, each followed by a device synchronize
(so host overhead counts, as it does for a user), after warm-up calls. The fused model's
first call (every plan compiled) is timed separately as `first_ms`.

Agreement: fp32 — relative L2 of fused vs eager outputs (TF32 off for both); 16-bit — top-1
class agreement of fused and of eager with the fp32 eager model over `--agree` random inputs.

    python3 bench/python/zoo_e2e.py --device cuda --dtype fp16 --channels-last --batch 1,32
    python3 bench/python/zoo_e2e.py --device cpu --dtype fp32 --batch 1 --models resnet50
"""

import argparse
import json
import statistics
import time

import torch
import torchvision

import conflux
import conflux.torch

MODELS = {
    "resnet50": (lambda: torchvision.models.resnet50(), 224),
    "resnext50_32x4d": (lambda: torchvision.models.resnext50_32x4d(), 224),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), 224),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(), 224),
    "convnext_tiny": (lambda: torchvision.models.convnext_tiny(), 224),
    "inception_v3": (lambda: torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True), 299),
    "deeplabv3_resnet50": (lambda: torchvision.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None, aux_loss=False), 224),
}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def output(y):
    return y["out"] if isinstance(y, dict) else y


def timed(f, x, iters, sync):
    with torch.no_grad():
        for _ in range(3):
            f(x)
        sync()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            f(x)
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def calibrated(model, size, dev):
    """Random weights with batch-norm statistics measured on random inputs, as training would
    leave them: without this, activations of deep random networks grow layer by layer and
    16-bit outputs overflow (in eager PyTorch as much as in conflux)."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for i in range(4):
            model(torch.randn(16, 3, size, size, device=dev, generator=torch.Generator(dev).manual_seed(1000 + i)))
    return model.eval()


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="fp16", choices=list(DTYPES))
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile(model) (default mode)")
    ap.add_argument("--constant-weights", action="store_true", help="fuse(model, constant_weights=True)")
    ap.add_argument("--tune", action="store_true", help="fuse(model, example_input=x): each chain where it was faster")
    ap.add_argument("--agree", type=int, default=0, help="random inputs for the agreement check (0: one batch)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    name_dev = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(f"# {name_dev}, torch {torch.__version__}, torchvision {torchvision.__version__}, conflux {conflux.__version__}, {args.dtype}, {'channels_last' if args.channels_last else 'NCHW'}")
    print("| model | N | eager ms | conflux ms | conflux/eager | compile ms | compile/eager | first call ms | convs fused | agreement |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in args.models.split(","):
        make, size = MODELS[name]
        torch.manual_seed(0)
        ref32 = calibrated(make().to(dev), size, dev)
        model = make().eval()
        model.load_state_dict(ref32.state_dict())
        model = model.to(device=dev, dtype=dtype, memory_format=fmt)
        batches = [int(b) for b in args.batch.split(",")]
        example = torch.randn(batches[0], 3, size, size, device=dev).to(dtype=dtype, memory_format=fmt) if args.tune else None
        sync()
        t0 = time.perf_counter()
        fused = conflux.torch.fuse(model, constant_weights=args.constant_weights, example_input=example)
        sync()
        fuse_ms = (time.perf_counter() - t0) * 1e3
        if args.tune:
            print(f"# {name}: fuse(example_input=N {batches[0]}) took {fuse_ms:.0f} ms (plans compiled in parallel, then each chain timed); "
                  + next(l for l in fused.conflux_census.splitlines() if "timed on the example" in l).strip(), flush=True)
        census = fused.conflux_census.splitlines()[0].split(": ", 1)[1].split(" convolutions")[0]
        if args.tune:
            census += " (tuned)"
        agreement = None
        for n in batches:
            x = torch.randn(n, 3, size, size, device=dev).to(dtype=dtype, memory_format=fmt)
            with torch.no_grad():
                sync()
                t0 = time.perf_counter()
                y_fused = output(fused(x))
                sync()
                first_ms = (time.perf_counter() - t0) * 1e3
                y_eager = output(model(x))
            eager_ms = timed(lambda t: model(t), x, args.iters, sync)
            fused_ms = timed(lambda t: fused(t), x, args.iters, sync)
            comp_ms = None
            if args.compile:
                torch._dynamo.reset()
                compiled = torch.compile(model)
                with torch.no_grad():
                    compiled(x)
                comp_ms = timed(lambda t: compiled(t), x, args.iters, sync)
            if dtype == torch.float32:
                # Both against the model in float64: is conflux as accurate as PyTorch?
                ref64 = make().eval()
                ref64.load_state_dict(ref32.state_dict())
                ref64 = ref64.to(device=dev, dtype=torch.float64)
                with torch.no_grad():
                    y64 = output(ref64(x.double()))
                agreement = f"rel L2 vs f64: conflux {rel_l2(y_fused, y64):.1e}, eager {rel_l2(y_eager, y64):.1e}"
                del ref64
            elif agreement is None:
                # Once per model, over batches of 32 random inputs.
                batches = max(1, -(-args.agree // 32))
                same_f = same_e = total = 0
                with torch.no_grad():
                    for i in range(batches):
                        xi = torch.randn(32, 3, size, size, device=dev, generator=torch.Generator(dev).manual_seed(i))
                        top = output(ref32(xi)).argmax(1)
                        xi = xi.to(dtype=dtype, memory_format=fmt)
                        same_f += (output(fused(xi)).argmax(1) == top).sum().item()
                        same_e += (output(model(xi)).argmax(1) == top).sum().item()
                        total += top.numel()
                agreement = f"top-1 vs fp32: conflux {same_f / total:.4f}, eager {same_e / total:.4f} ({total})"
            row = dict(model=name, n=n, eager_ms=eager_ms, conflux_ms=fused_ms, compile_ms=comp_ms, first_ms=first_ms, fused=census, agreement=agreement)
            c = f"{comp_ms:.2f} | {comp_ms / eager_ms:.2f}" if comp_ms else "– | –"
            print(f"| {name} | {n} | {eager_ms:.2f} | {fused_ms:.2f} | {fused_ms / eager_ms:.2f} | {c} | {first_ms:.0f} | {census} | {agreement} |", flush=True)
            print("JSON " + json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
