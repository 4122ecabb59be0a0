"""conflux.FusionPlan: MIOpen's Fusion API from Python (conv → bias → BN → add → activation)."""

import torch
import torch.nn.functional as F

import conflux
from conftest import rel_l2


def test_full_chain_matches_pytorch(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 10, 10, generator=g).to(device)
    w = (torch.randn(12, 8, 3, 3, generator=g) * 0.2).to(device)
    b = torch.randn(12, generator=g).to(device)
    mean, var = torch.randn(12, generator=g).to(device), (torch.rand(12, generator=g) + 0.5).to(device)
    scale, shift = torch.randn(12, generator=g).to(device), torch.randn(12, generator=g).to(device)
    z = torch.randn(2, 12, 5, 5, generator=g).to(device)
    plan = conflux.FusionPlan(x)
    plan.add_conv(w, stride=2, padding=1)
    plan.add_bias(b)
    plan.add_batch_norm(mean)
    plan.add_add()
    plan.add_activation(("leaky_relu", 0.2))
    plan.compile()
    assert plan.solver
    y = plan.execute(x, [w, b, (mean, var, scale, shift, 1e-5), z, None])
    ref = F.conv2d(x.double(), w.double(), b.double(), 2, 1)
    ref = F.batch_norm(ref, mean.double(), var.double(), scale.double(), shift.double(), False, 0.0, 1e-5) + z.double()
    ref = F.leaky_relu(ref, 0.2)
    assert rel_l2(y.cpu(), ref.cpu()) < 1e-5
    # Executed again with new data and weights: same plan, new results.
    w2 = w * -1
    y2 = plan.execute(x, [w2, b, (mean, var, scale, shift, 1e-5), (z, 0.5), None])
    ref2 = F.conv2d(x.double(), w2.double(), b.double(), 2, 1)
    ref2 = F.leaky_relu(F.batch_norm(ref2, mean.double(), var.double(), scale.double(), shift.double(), False, 0.0, 1e-5) + 0.5 * z.double(), 0.2)
    assert rel_l2(y2.cpu(), ref2.cpu()) < 1e-5
