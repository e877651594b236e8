"""University-admission logistic regression from two exam scores (the classic exercise: standardised features, nn.Linear, a DataLoader, Adam, a binary cross-entropy written out by hand); bug: the hand-written loss takes torch.log(1 - p) of p = torch.sigmoid(z); the two classes are separable, z keeps growing, and at step 1141 (epoch 285) sigmoid rounds to exactly 1.0 for the strongest applicant, so log(1 - p) is -inf and the loss NaN from then on (torch.nn.functional.binary_cross_entropy_with_logits stays finite)."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_applicants(n, generator):
    exams = 30 + 70 * torch.rand(n, 2, generator=generator)
    admitted = (exams.sum(dim=1) > 130).float()
    return exams, admitted


class LogisticRegression(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.linear = nn.Linear(n_features, 1)

    def forward(self, x):
        return self.linear(x).squeeze(1)


def binary_cross_entropy(logits, targets):
    p = torch.sigmoid(logits)
    log_p = torch.log(p)
    log_not_p = torch.log(1 - p)  # expect: nonfinite
    return -(targets * log_p + (1 - targets) * log_not_p).mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=320)
    parser.add_argument("--batch-size", type=int, default=25)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--log-every", type=int, default=80)
    args = parser.parse_args()

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    exams, admitted = make_applicants(100, g)
    mean, std = exams.mean(dim=0), exams.std(dim=0)
    features = (exams - mean) / std
    loader = DataLoader(TensorDataset(features, admitted), batch_size=args.batch_size, shuffle=True)

    model = LogisticRegression(2)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        epoch_loss = 0.0
        for x, y in loader:
            loss = binary_cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item() * len(y)
        if epoch % args.log_every == 0 or epoch == args.epochs - 1:
            with torch.no_grad():
                accuracy = ((model(features) > 0).float() == admitted).float().mean().item()
            print(f"epoch {epoch}: loss {epoch_loss / len(admitted):.6f} accuracy {accuracy:.2%}")

    with torch.no_grad():
        student = (torch.tensor([[45.0, 85.0]]) - mean) / std
        print(f"P(admit | 45, 85) = {torch.sigmoid(model(student)).item():.3f}")


if __name__ == "__main__":
    main()
