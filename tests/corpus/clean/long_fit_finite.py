"""Long fits that stay finite (clean): the exam-score admission logistic regression trained for 1,280 steps until its logits pass 17 (where sigmoid rounds to 1.0), with the loss written stably as -(y * F.logsigmoid(z) + (1 - y) * F.logsigmoid(-z)); softmax regression from scratch (d2l style) on separable blobs whose log-probabilities and log-partition use torch.logsumexp, not torch.log(torch.exp(o).sum(...)), while its logits grow past 18."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def stable_bce(logits, targets):
    return -(targets * F.logsigmoid(logits) + (1 - targets) * F.logsigmoid(-logits)).mean()


def log_softmax_scratch(o):
    return o - torch.logsumexp(o, dim=1, keepdim=True)


def fit_logistic(args):
    g = torch.Generator().manual_seed(0)
    exams = 30 + 70 * torch.rand(100, 2, generator=g)
    admitted = (exams.sum(dim=1) > 130).float()
    features = (exams - exams.mean(dim=0)) / exams.std(dim=0)
    loader = DataLoader(TensorDataset(features, admitted), batch_size=25, shuffle=True)
    model = nn.Linear(2, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = stable_bce(model(x).squeeze(1), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if epoch % 80 == 0 or epoch == args.epochs - 1:
            with torch.no_grad():
                z = model(features).squeeze(1)
            print(f"logistic epoch {epoch}: loss {loss.item():.3e} max |z| {z.abs().max().item():.1f}")


def fit_softmax(args):
    g = torch.Generator().manual_seed(1)
    centers = torch.tensor([[4.0, 0.0], [-4.0, 0.0], [0.0, 4.0]])
    y = torch.randint(0, 3, (150,), generator=g)
    x = centers[y] + torch.randn(150, 2, generator=g)
    W = torch.normal(0, 0.01, size=(2, 3), requires_grad=True)
    b = torch.zeros(3, requires_grad=True)
    optimizer = torch.optim.Adam([W, b], lr=0.1)
    loader = DataLoader(TensorDataset(x, y), batch_size=30, shuffle=True)
    for epoch in range(args.softmax_epochs):
        for xb, yb in loader:
            log_probs = log_softmax_scratch(xb @ W + b)
            loss = -log_probs[torch.arange(len(yb)), yb].mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        logits = x @ W + b
        log_z = torch.logsumexp(logits, dim=1)
        acc = (logits.argmax(1) == y).float().mean().item()
    print(f"softmax: loss {loss.item():.3e} max logit {logits.max().item():.1f} "
          f"mean log Z {log_z.mean().item():.1f} accuracy {acc:.2%}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=320)
    parser.add_argument("--softmax-epochs", type=int, default=100)
    args = parser.parse_args()
    torch.manual_seed(0)
    fit_logistic(args)
    fit_softmax(args)


if __name__ == "__main__":
    main()
