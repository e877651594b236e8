"""Benchmark workload: 2-rank DDP training on CPU (gloo), 100 steps of a small MLP, each
step's loss all-reduced from user code (as loops log it). Rank 0 reports the CPU time of its
hot section."""

from __future__ import annotations

import json
import os
import time

import torch
import torch.distributed as dist

STEPS = 100


def train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = torch.zeros(())
    for _ in range(STEPS):
        optimizer.zero_grad()
        pred = model(x)
        loss = ((pred - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        logged = loss.detach().clone()
        dist.all_reduce(logged)  # the mean loss over the ranks, as training loops log it
    return loss.item()


if __name__ == "__main__":
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    model = torch.nn.parallel.DistributedDataParallel(net)
    x, y = torch.randn(32, 16), torch.randn(32, 4)
    start = time.process_time()
    train(model, x, y)
    cpu_s = time.process_time() - start
    if dist.get_rank() == 0:
        with open(os.environ["SHAPELENS_BENCH_OUT"], "w") as out:
            json.dump({"workload": "ddp_train", "cpu_s": cpu_s}, out)
    dist.destroy_process_group()
