"""Graph helpers: a stochastic block model and the row-normalised adjacency."""

import torch


def stochastic_block_model(sizes, p_in, p_out, generator):
    n = sum(sizes)
    labels = torch.cat([torch.full((s,), i) for i, s in enumerate(sizes)])
    same = labels[:, None] == labels[None, :]
    probs = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    upper = torch.triu(torch.rand(n, n, generator=generator) < probs, diagonal=1)
    adj = (upper | upper.T).float()
    return adj, labels


def row_normalize(adj):
    """D^-1 A: every node averages the features of its neighbours."""
    norm_adj = adj / adj.sum(dim=1, keepdim=True)  # expect: nonfinite
    return norm_adj
