"""`fuse(model, example_input=x)`: run the fused model once on an example input and, for
every fused chain, time conflux against the same chain in PyTorch on the tensors it really
receives; a chain runs where it was faster (as cuDNN's benchmark mode picks per shape)."""

import os
import time
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import fx

from ._modules import FusedConv2d


def _per_call_ms(f, sync, reps=10, rounds=3):
    """The best of `rounds` averages over `reps` back-to-back calls (one sync per round), in ms."""
    with torch.no_grad():
        f()
        f()
        sync()
        best = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
            sync()
            best.append((time.perf_counter() - t0) * 1e3 / reps)
    return min(best)


class _Chooser(fx.Interpreter):
    def __init__(self, gm, choices):
        super().__init__(gm)
        self.choices = choices

    def call_module(self, target, args, kwargs):
        m = self.fetch_attr(target)
        if isinstance(m, FusedConv2d):
            x = args[0]
            sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
            m.use_conflux = True
            ours = _per_call_ms(lambda: m(*args, **kwargs), sync)
            theirs = _per_call_ms(lambda: m.eager(*args, **kwargs), sync)
            m.use_conflux = ours <= theirs
            self.choices[target] = (ours, theirs)
        return super().call_module(target, args, kwargs)


class _Recorder(fx.Interpreter):
    """Runs the model with every chain in PyTorch, recording what each fused module receives."""

    def __init__(self, gm, calls):
        super().__init__(gm)
        self.calls = calls

    def call_module(self, target, args, kwargs):
        m = self.fetch_attr(target)
        if isinstance(m, FusedConv2d):
            self.calls.append((m, args))
            return m.eager(*args, **kwargs)
        return super().call_module(target, args, kwargs)


def compile_all(gm, example_input, threads=None):
    """Compile every fused chain's plan for the shapes the example input gives it, several
    at once (kernel compilation runs without the GIL): a cold start costs the longest
    compiles, not their sum. Returns how many plans were prepared."""
    calls = []
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    with torch.no_grad():
        _Recorder(gm, calls).run(*inputs)
    with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as pool:
        list(pool.map(lambda c: c[0].prepare(*c[1]), calls))
    return len(calls)


def choose_by_timing(gm, example_input):
    """Set each FusedConv2d's `use_conflux` from a timed run; returns {name: (conflux ms, eager ms)}."""
    choices = {}
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    with torch.no_grad():
        _Chooser(gm, choices).run(*inputs)
    return choices


def summary(choices):
    kept = [n for n, (a, b) in choices.items() if a > b]
    total_ours = sum(min(a, b) for a, b in choices.values())
    total_theirs = sum(b for _, b in choices.values())
    return (f"timed on the example input: {len(choices) - len(kept)} chains run on conflux, {len(kept)} stay PyTorch (faster there); "
            f"Σ chain time {total_ours:.3f} ms vs {total_theirs:.3f} ms all-PyTorch"), kept
