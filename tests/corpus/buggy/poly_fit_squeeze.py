"""Polynomial regression (pytorch/examples) with a hand-written MSE; bug: fc(batch_x) (N, 1) - batch_y.squeeze(1) (N,) is an (N, N) difference."""

import torch

torch.manual_seed(0)

POLY_DEGREE = 3
W_target = torch.randn(POLY_DEGREE, 1) * 3
b_target = torch.randn(1) * 3


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3]."""
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    """Approximated function."""
    return x.mm(W_target) + b_target.item()


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    y = f(x)
    return x, y


fc = torch.nn.Linear(W_target.size(0), 1)
optimizer = torch.optim.SGD(fc.parameters(), lr=0.01)

for batch_idx in range(1, 201):
    batch_x, batch_y = get_batch()
    optimizer.zero_grad()
    loss = ((fc(batch_x) - batch_y.squeeze(1)) ** 2).mean()  # expect: broadcast
    loss.backward()
    optimizer.step()
    if batch_idx % 50 == 0:
        print(f"batch {batch_idx}: loss {loss.item():.4f}")

print("learned:", fc.weight.view(-1).tolist(), fc.bias.item())
print("target: ", W_target.view(-1).tolist(), b_target.item())
