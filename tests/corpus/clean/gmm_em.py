"""k-means and a diagonal Gaussian mixture fitted by EM: (N, 1, D) - (K, D) broadcasts and logsumexp responsibilities with keepdim (clean)."""

import math

import torch

torch.manual_seed(0)

true_means = torch.tensor([[0.0, 0.0], [4.0, 4.0], [-4.0, 3.0]])
true_std = torch.tensor([[0.5, 0.8], [1.0, 0.4], [0.7, 0.7]])
counts = [150, 100, 50]
x = torch.cat([torch.randn(n, 2) * s + m for n, m, s in zip(counts, true_means, true_std)])
N, D = x.shape
K = 3


def kmeans(x, k, iters=10):
    # farthest-point initialisation: start from a random point, then repeatedly take the
    # point farthest from the centroids chosen so far
    centroids = x[torch.randint(len(x), (1,))]
    while len(centroids) < k:
        nearest = torch.cdist(x, centroids).min(dim=1).values
        centroids = torch.cat([centroids, x[nearest.argmax()].unsqueeze(0)])
    for _ in range(iters):
        x_ = x[:, None, :]  # (N, 1, D)
        d2 = ((x_ - centroids) ** 2).sum(-1)  # (N, K)
        assign = d2.argmin(dim=1)
        for j in range(k):
            members = x[assign == j]
            if len(members) > 0:
                centroids[j] = members.mean(dim=0)
    return centroids, assign


def log_gaussian(x, means, variances):
    """log N(x_n | mu_k, diag(var_k)) for every n, k -> (N, K)."""
    x_ = x.unsqueeze(1)  # (N, 1, D)
    diff = x_ - means  # (N, K, D)
    log_det = torch.log(variances).sum(-1)  # (K,)
    maha = (diff**2 / variances).sum(-1)  # (N, K)
    return -0.5 * (maha + log_det + x.size(1) * math.log(2 * math.pi))


centroids, assign = kmeans(x, K)
means = centroids.clone()
variances = torch.ones(K, D)
log_weights = torch.full((K,), -math.log(K))

prev = -float("inf")
for it in range(30):
    # E-step
    weighted = log_gaussian(x, means, variances) + log_weights  # (N, K) + (K,)
    log_norm = torch.logsumexp(weighted, dim=1, keepdim=True)  # (N, 1)
    log_resp = weighted - log_norm
    resp = log_resp.exp()
    log_likelihood = log_norm.mean().item()

    # M-step
    nk = resp.sum(dim=0) + 1e-10  # (K,)
    means = (resp.T @ x) / nk[:, None]
    diff = x.unsqueeze(1) - means  # (N, K, D)
    variances = (resp.unsqueeze(-1) * diff**2).sum(dim=0) / nk[:, None] + 1e-6
    log_weights = torch.log(nk / N)

    if it % 10 == 0:
        print(f"iter {it}: mean log-likelihood {log_likelihood:.4f}")
    if abs(log_likelihood - prev) < 1e-6:
        break
    prev = log_likelihood

order = means[:, 0].argsort()
print("weights:", [round(w, 3) for w in log_weights.exp()[order].tolist()])
print("means:", [[round(v, 2) for v in row] for row in means[order].tolist()])
