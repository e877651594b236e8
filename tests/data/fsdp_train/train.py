"""FSDP2 (fully_shard) training of a small MLP under torchrun (gloo, CPU)."""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

try:
    from torch.distributed.fsdp import fully_shard  # torch 2.6 and newer
except ImportError:  # torch 2.4, 2.5
    from torch.distributed._composable.fsdp import fully_shard


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Model(torch.nn.Module):
    def __init__(self, features: int, width: int, depth: int, classes: int) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(features, width)
        self.blocks = torch.nn.ModuleList(Block(width) for _ in range(depth))
        self.head = torch.nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", default="checkpoint.pt")
    parser.add_argument("--eval", choices=["sampler", "manual"], default="sampler")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    run_name = [f"fsdp-{os.getpid()}"] if rank == 0 else [None]
    dist.broadcast_object_list(run_name, src=0)  # every rank names its files alike
    assert run_name[0] is not None
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(40, 12), torch.randint(0, 5, (40,)))
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    model = Model(features=12, width=32, depth=2, classes=5)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    weight = model.blocks[0].up.weight
    if rank == 0:
        print(f"blocks.0.up.weight {tuple(weight.shape)} placed {weight.placements}", flush=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = 0
    while step < args.steps:
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            if rank == 0:
                print(f"step {step} loss {loss.item():.4f} norm {norm.item():.3f}", flush=True)
            step += 1
            if step == args.steps:
                break
    held_out = TensorDataset(torch.randn(41, 12), torch.randint(0, 5, (41,)))
    if args.eval == "manual":  # uneven when not divisible
        indices = torch.arange(len(held_out)).tensor_split(dist.get_world_size())[rank]
    else:  # pads the last shard: every rank gets as many
        indices = torch.tensor(list(DistributedSampler(held_out, shuffle=False)))
    with torch.no_grad():
        inputs, labels = held_out.tensors[0][indices], held_out.tensors[1][indices]
        per_sample = F.cross_entropy(model(inputs), labels, reduction="none")
    dist.all_reduce(per_sample)
    if rank == 0:
        print(f"held-out loss {per_sample.mean().item() / dist.get_world_size():.4f}")
    full = {name: p.full_tensor() for name, p in model.state_dict().items()}
    if rank == 0:
        torch.save(full, f"{run_name[0]}-{args.out}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
