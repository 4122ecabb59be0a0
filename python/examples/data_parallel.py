#!/usr/bin/env python3
"""Data-parallel inference and training with conflux on several GPUs (torch.distributed, NCCL).

Each rank owns one GPU and, through conflux's one-handle-per-device rule, one conflux handle.
Inference: a fused ResNet-50 (`conflux.torch.fuse`) runs on each rank's shard of one batch;
the shards are gathered and rank 0 checks them against the eager model on the whole batch.
Training: a small CNN whose convolutions are `conflux.conv2d` (conflux's backward kernels)
trains under DistributedDataParallel; rank 0 checks its losses against the same model trained
in eager PyTorch on one GPU with the whole batch.

    python3 -m torch.distributed.run --nproc_per_node=2 python/examples/data_parallel.py
"""

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch import nn

import conflux
import conflux.torch


class SmallCNN(nn.Module):
    def __init__(self, use_conflux):
        super().__init__()
        self.use_conflux = use_conflux
        self.c1 = nn.Conv2d(3, 16, 3, 1, 1)
        self.c2 = nn.Conv2d(16, 32, 3, 2, 1)
        self.fc = nn.Linear(32, 10)

    def conv(self, m, x):
        if self.use_conflux:
            return conflux.conv2d(x, m.weight, m.bias, m.stride, m.padding, activation="relu")
        return F.relu(F.conv2d(x, m.weight, m.bias, m.stride, m.padding))

    def forward(self, x):
        return self.fc(self.conv(self.c2, self.conv(self.c1, x)).mean((2, 3)))


def rel_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.backends.cudnn.allow_tf32 = False

    # Inference: one batch split across ranks.
    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval().to(dev)
    fused = conflux.torch.fuse(model)
    batch = torch.randn(8 * world, 3, 224, 224, generator=torch.Generator().manual_seed(1)).to(dev)
    shard = batch.chunk(world)[rank]
    with torch.no_grad():
        out = fused(shard)
    gathered = [torch.empty_like(out) for _ in range(world)]
    dist.all_gather(gathered, out)
    handle_device = conflux.handle(f"cuda:{local}").device
    if rank == 0:
        with torch.no_grad():
            ref = model(batch)
        err = rel_l2(torch.cat(gathered), ref)
        print(f"inference: {world} ranks, ResNet-50 fused, batch {batch.shape[0]}: rel L2 vs eager {err:.1e} ({'OK' if err < 1e-4 else 'FAIL'})")
    print(f"rank {rank}: conflux handle on {handle_device}", flush=True)

    # Training: DDP over conflux.conv2d, compared with single-GPU eager on the whole batch.
    torch.manual_seed(2)
    net = SmallCNN(True).to(dev)
    ref_net = SmallCNN(False).to(dev)
    ref_net.load_state_dict(net.state_dict())
    ddp = nn.parallel.DistributedDataParallel(net, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref_net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(3)
    worst = 0.0
    for step in range(5):
        x = torch.randn(16 * world, 3, 16, 16, generator=g).to(dev)
        t = torch.randint(0, 10, (16 * world,), generator=g).to(dev)
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x.chunk(world)[rank]), t.chunk(world)[rank])
        loss.backward()
        opt.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        mean_loss /= world
        ref_opt.zero_grad()
        ref_loss = F.cross_entropy(ref_net(x), t)
        ref_loss.backward()
        ref_opt.step()
        worst = max(worst, abs(mean_loss.item() - ref_loss.item()))
        if rank == 0:
            print(f"train step {step}: loss {mean_loss.item():.6f} (eager single GPU {ref_loss.item():.6f})")
    if rank == 0:
        print(f"training: largest loss difference {worst:.1e} ({'OK' if worst < 1e-4 else 'FAIL'})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
