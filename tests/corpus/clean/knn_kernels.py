"""Pairwise distances (broadcast, keepdim expansion, cdist), leave-one-out kNN with an Inf diagonal, kernel ridge and a multi-width MMD (clean)."""

import torch

torch.manual_seed(0)


def sqdist(a, b):
    """Squared Euclidean distances between the rows of a (N, D) and b (M, D) -> (N, M)."""
    a2 = (a * a).sum(dim=1, keepdim=True)  # (N, 1)
    b2 = (b * b).sum(dim=1)  # (M,)
    return (a2 + b2 - 2.0 * a @ b.T).clamp_min(0.0)


def make_blobs(n_per_class, centers, scale):
    xs, ys = [], []
    for label, center in enumerate(centers):
        xs.append(torch.randn(n_per_class, len(center)) * scale + torch.tensor(center))
        ys.append(torch.full((n_per_class,), label, dtype=torch.long))
    return torch.cat(xs), torch.cat(ys)


x, y = make_blobs(40, [(0.0, 0.0, 0.0), (3.0, 3.0, 0.0), (0.0, 3.0, 3.0)], scale=0.8)
n = len(x)

# three ways to get the same (N, N) matrix
diff = x[:, None, :] - x[None, :, :]  # (N, N, D)
d_broadcast = (diff**2).sum(-1).sqrt()
d_expand = sqdist(x, x).sqrt()
d_cdist = torch.cdist(x, x)
assert torch.allclose(d_broadcast, d_cdist, atol=1e-2)
assert torch.allclose(d_expand, d_cdist, atol=1e-2)

# leave-one-out k-nearest-neighbour classification: a point is not its own neighbour
k = 5
d = d_cdist.clone()
d.fill_diagonal_(float("inf"))
knn_dist, knn_idx = d.topk(k, dim=1, largest=False)
votes = torch.zeros(n, 3).scatter_add_(1, y[knn_idx], torch.ones(n, k))
pred = votes.argmax(dim=1)
print(f"leave-one-out {k}-NN accuracy: {(pred == y).float().mean().item():.3f}")
print(f"mean distance to the {k} neighbours: {knn_dist.mean().item():.3f}")

# RBF kernel ridge regression of a smooth target
target = torch.sin(x[:, 0]) + 0.5 * torch.cos(x[:, 1]) + 0.05 * torch.randn(n)
sigma = 1.0
lam = 1e-2
K = torch.exp(-sqdist(x, x) / (2 * sigma**2))
alpha = torch.linalg.solve(K + lam * torch.eye(n), target)

x_test = torch.rand(20, 3) * 3.0
target_test = torch.sin(x_test[:, 0]) + 0.5 * torch.cos(x_test[:, 1])
K_test = torch.exp(-sqdist(x_test, x) / (2 * sigma**2))  # (20, N)
pred_test = K_test @ alpha
rmse = ((pred_test - target_test) ** 2).mean().sqrt()
print(f"kernel ridge test RMSE: {rmse.item():.4f}")

# maximum mean discrepancy between two samples with a sum of RBF kernels of several widths
bandwidths = torch.tensor([0.5, 1.0, 2.0, 4.0]).reshape(-1, 1, 1)  # (S, 1, 1)


def mmd2(a, b):
    d_aa, d_bb, d_ab = sqdist(a, a), sqdist(b, b), sqdist(a, b)
    k_aa = torch.exp(-d_aa / bandwidths).sum(0)  # (S, N, N) summed over the widths
    k_bb = torch.exp(-d_bb / bandwidths).sum(0)
    k_ab = torch.exp(-d_ab / bandwidths).sum(0)
    return k_aa.mean() + k_bb.mean() - 2 * k_ab.mean()


same = mmd2(x[y == 0][:20], x[y == 0][20:])
different = mmd2(x[y == 0], x[y == 1])
print(f"MMD^2 same class {same.item():.4f}, different classes {different.item():.4f}")
assert different > same
