"""The dataset and how it is split over the ranks."""

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset


def make_dataset(samples: int, features: int, classes: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(samples, features, generator=generator)
    labels = torch.randint(0, classes, (samples,), generator=generator)
    return TensorDataset(inputs, labels)


def make_loader(dataset, batch_size: int, shard: str, epoch: int) -> DataLoader:
    rank, world = dist.get_rank(), dist.get_world_size()
    if shard == "sampler":  # pads the last shard: every rank sees as many samples
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True)
        sampler.set_epoch(epoch)
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    indices = torch.arange(len(dataset)).tensor_split(world)[rank]  # uneven when not divisible
    return DataLoader(Subset(dataset, indices.tolist()), batch_size=batch_size)
