"""Data-parallel training of a small classifier under torchrun (gloo, CPU)."""

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from data import make_dataset, make_loader
from torch.nn.parallel import DistributedDataParallel


class Classifier(torch.nn.Module):
    def __init__(self, features: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU())
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def global_grad_norm(model: torch.nn.Module) -> torch.Tensor:
    local = torch.stack([p.grad.pow(2).sum() for p in model.parameters()]).sum()
    dist.all_reduce(local)
    return local.sqrt()


def sync_metrics(loss_sum: torch.Tensor, count: torch.Tensor, swapped: bool) -> None:
    if swapped:
        dist.all_reduce(count)
        dist.all_reduce(loss_sum)
    else:
        dist.all_reduce(loss_sum)
        dist.all_reduce(count)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(Path(__file__).with_name("config.json")))
    parser.add_argument("--shard", choices=["sampler", "manual"], default="sampler")
    parser.add_argument("--bug", choices=["none", "swapped", "lone-barrier"], default="none")
    parser.add_argument("--stall-rank", type=int, default=-1)
    parser.add_argument("--out", default="checkpoints")
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    dataset = make_dataset(config["samples"], config["features"], config["classes"])
    model = DistributedDataParallel(
        Classifier(config["features"], config["hidden"], config["classes"])
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])

    for epoch in range(config["epochs"]):
        loader = make_loader(dataset, config["batch_size"], args.shard, epoch)
        losses = []
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y, reduction="none")
            optimizer.zero_grad()
            loss.mean().backward()
            norm = global_grad_norm(model)
            if norm > config["max_norm"]:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config["max_norm"])
            optimizer.step()
            losses.append(loss.detach())
            if rank == args.stall_rank and epoch == 1:
                print(f"stalling {os.getpid()}", flush=True)
                time.sleep(600)  # a slow step (the OOM killer ends it)
        per_sample = torch.cat(losses)
        dist.all_reduce(per_sample)  # every rank's per-sample losses, summed
        loss_sum = per_sample.sum().reshape(1)
        count = torch.tensor([float(len(per_sample))])
        sync_metrics(loss_sum, count, swapped=args.bug == "swapped" and rank == 1)
        if rank == 0:
            print(f"epoch {epoch} loss {(loss_sum / count).item():.4f}", flush=True)
            os.makedirs(args.out, exist_ok=True)
            torch.save(model.module.state_dict(), os.path.join(args.out, f"epoch{epoch}.pt"))
            if args.bug == "lone-barrier":
                dist.barrier()  # only rank 0 waits for the others
        if args.bug != "lone-barrier":
            dist.barrier()  # the checkpoint is written before anyone reads it
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
