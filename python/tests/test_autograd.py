"""conflux.conv2d is differentiable through conflux's backward kernels (backward-data,
backward-weights, bias and activation backward): gradients against PyTorch's, and a small
CNN trained a few steps through it gives PyTorch's losses."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import conflux
from conftest import rel_l2

ACTS = {None: lambda t: t, "relu": F.relu, "relu6": F.relu6, "leaky_relu": lambda t: F.leaky_relu(t, 0.01),
        "sigmoid": torch.sigmoid, "tanh": torch.tanh, "elu": F.elu, "silu": F.silu, "hardswish": F.hardswish,
        "hardsigmoid": F.hardsigmoid, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "mish": F.mish}


def leaves(device, shape_x, shape_w, k, seed, residual_shape=None):
    g = torch.Generator().manual_seed(seed)
    make = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(device).requires_grad_()
    x, w, b = make(*shape_x), make(*shape_w), make(k)
    with torch.no_grad():
        w.mul_(0.3)
    r = make(*residual_shape) if residual_shape else None
    return x, w, b, r


def grads_of(f, tensors, seed):
    out = f()
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(out.device)
    return torch.autograd.grad(out, [t for t in tensors if t is not None], g.to(out.dtype))


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("geom", [(1, 1, 1), (2, 1, 1), (1, 2, 4)], ids=["s1", "s2", "dil2-g4"])
def test_gradients_match_pytorch(device, act, geom):
    stride, dilation, groups = geom
    x, w, b, r = leaves(device, (2, 8, 9, 9), (8, 8 // groups, 3, 3), 8, 0)
    out_hw = (9 + 2 - dilation * 2 - 1) // stride + 1
    _, _, _, r = leaves(device, (1,), (1,), 1, 1, residual_shape=(2, 8, out_hw, out_hw))
    f32 = [t.detach().float().requires_grad_() for t in (x, w, b, r)]
    mine = grads_of(lambda: conflux.conv2d(f32[0], f32[1], f32[2], stride, 1, dilation, groups, act, f32[3]), f32, 5)
    ref = grads_of(lambda: ACTS[act](F.conv2d(x, w, b, stride, 1, dilation, groups) + r), (x, w, b, r), 5)
    for m, e, name in zip(mine, ref, ("dx", "dw", "db", "dresidual")):
        assert rel_l2(m.cpu(), e.cpu()) < 1e-4, name


def test_gradient_of_x_only(device):
    x = torch.randn(1, 4, 6, 6, device=device, requires_grad=True)
    w = torch.randn(4, 4, 3, 3, device=device)
    (dx,) = torch.autograd.grad(conflux.conv2d(x, w, padding=1, activation="relu").sum(), [x])
    x2 = x.detach().requires_grad_()
    (ref,) = torch.autograd.grad(F.relu(F.conv2d(x2, w, padding=1)).sum(), [x2])
    assert rel_l2(dx.cpu(), ref.cpu()) < 1e-5


class SmallCNN(nn.Module):
    def __init__(self, use_conflux):
        super().__init__()
        self.use_conflux = use_conflux
        self.c1 = nn.Conv2d(3, 8, 3, 1, 1)
        self.c2 = nn.Conv2d(8, 16, 3, 2, 1)
        self.c3 = nn.Conv2d(16, 16, 3, 1, 1, groups=4)
        self.fc = nn.Linear(16, 4)

    def conv(self, m, x, act, residual=None):
        if self.use_conflux:
            return conflux.conv2d(x, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups, act, residual)
        y = F.conv2d(x, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups)
        y = y if residual is None else y + residual
        return ACTS[act](y)

    def forward(self, x):
        x = self.conv(self.c1, x, "relu")
        x = self.conv(self.c2, x, "relu6")
        x = self.conv(self.c3, x, "relu", residual=x)
        return self.fc(x.mean((2, 3)))


def test_training_matches_pytorch_losses(device):
    torch.manual_seed(0)
    ref_model = SmallCNN(False).to(device)
    model = SmallCNN(True).to(device)
    model.load_state_dict(ref_model.state_dict())
    g = torch.Generator().manual_seed(2)
    data = [(torch.randn(8, 3, 12, 12, generator=g).to(device), torch.randint(0, 4, (8,), generator=g).to(device)) for _ in range(5)]
    losses = {}
    for name, m in (("ref", ref_model), ("conflux", model)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        losses[name] = []
        for x, t in data:
            opt.zero_grad()
            loss = F.cross_entropy(m(x), t)
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    assert losses["conflux"][-1] < losses["conflux"][0]
    for a, b in zip(losses["conflux"], losses["ref"]):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(b)), (losses["conflux"], losses["ref"])
