"""Fused models under torch.compile and torch.export: conflux's ops are custom ops with fake
kernels, so the compiler traces through the model and keeps each fused convolution as one
opaque call (no graph break)."""

import torch

import conflux
import conflux.torch
from conftest import rel_l2
from models import TinyMobileNet, TinyResNet, randomize_bn


def test_torch_compile_default_backend(device):
    torch.manual_seed(0)
    model = randomize_bn(TinyResNet()).eval().to(device)
    fused = conflux.torch.fuse(model)
    x = torch.randn(2, 3, 32, 32, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(fused, fullgraph=True)
    with torch.no_grad():
        assert rel_l2(compiled(x).cpu(), model(x).cpu()) < 1e-4


def test_torch_export_keeps_conflux_ops():
    torch.manual_seed(0)
    model = randomize_bn(TinyMobileNet()).eval()
    fused = conflux.torch.fuse(model)
    x = torch.randn(2, 3, 32, 32)
    exported = torch.export.export(fused, (x,))
    ops = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert "conflux.conv_fused.default" in ops
    with torch.no_grad():
        assert rel_l2(exported.module()(x), model(x)) < 1e-4


def test_compiled_training_step_uses_conflux_backward():
    torch.manual_seed(0)
    w = torch.randn(8, 4, 3, 3, requires_grad=True)
    x = torch.randn(2, 4, 10, 10, requires_grad=True)

    def step(x, w):
        return conflux.conv2d(x, w, padding=1, activation="relu").square().sum()

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    gx, gw = torch.autograd.grad(compiled(x, w), [x, w])
    ex, ew = torch.autograd.grad(step(x, w), [x, w])
    assert rel_l2(gx, ex) < 1e-5 and rel_l2(gw, ew) < 1e-5


def test_functional_call_inside_compiled_inference():
    w = torch.randn(8, 4, 3, 3)
    x = torch.randn(2, 4, 10, 10)
    f = torch.compile(lambda x: conflux.conv2d(x, w, padding=1, activation="relu") * 2, fullgraph=True)
    with torch.no_grad():
        assert rel_l2(f(x), conflux.conv2d(x, w, padding=1, activation="relu") * 2) < 1e-6
