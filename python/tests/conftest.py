"""Shared helpers of the conflux Python suite. CUDA variants run where a GPU is visible and
fail instead of skipping when CONFLUX_REQUIRE_GPU=1 (as on the GPU machine)."""

import os

import numpy as np
import pytest


def rel_l2(a, b):
    """‖a − b‖ / ‖b‖ in float64; NaN or ∞ anywhere gives ∞ (never a pass)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("inf")
    den = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / (den if den > 0 else 1.0))


def devices():
    """The devices to test: the CPU always, CUDA when present or required."""
    out = ["cpu"]
    try:
        import torch

        have = torch.cuda.is_available()
    except ImportError:
        have = False
    if have or os.environ.get("CONFLUX_REQUIRE_GPU") == "1":
        out.append("cuda")
    return out


@pytest.fixture(params=devices())
def device(request):
    if request.param == "cuda":
        import torch

        if not torch.cuda.is_available():
            pytest.fail("CONFLUX_REQUIRE_GPU=1 but torch sees no GPU")
    return request.param
