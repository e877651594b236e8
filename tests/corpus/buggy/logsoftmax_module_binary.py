"""Bag-of-words spam filter moved from two outputs (LogSoftmax + NLLLoss) to one logit and nn.BCEWithLogitsLoss; bug: the head's final Linear now has one output but forward() still ends in self.log_softmax = nn.LogSoftmax(dim=1), which over the size-1 dim of the (N, 1) logits is 0 for every message, so the loss sits at log(2) = 0.693 and nothing trains."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

SPAM_WORDS = 40  # ids below this are "free", "winner", "prize", ...


def make_messages(n, vocab_size, generator):
    """Word-count vectors; spam messages use the spam words more often."""
    is_spam = (torch.rand(n, generator=generator) < 0.4).float()
    rate = torch.full((n, vocab_size), 0.02)
    rate[:, :SPAM_WORDS] += 0.08 * is_spam.unsqueeze(1)
    counts = torch.poisson(rate * 20, generator=generator)
    return counts, is_spam.unsqueeze(1)


class SpamClassifier(nn.Module):
    def __init__(self, vocab_size, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(vocab_size, hidden)
        self.dropout = nn.Dropout(0.3)
        self.fc2 = nn.Linear(hidden, 1)
        self.log_softmax = nn.LogSoftmax(dim=1)

    def forward(self, x):
        x = torch.log1p(x)
        x = self.dropout(torch.relu(self.fc1(x)))
        x = self.fc2(x)
        return self.log_softmax(x)  # expect: degenerate_op


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab-size", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    X, y = make_messages(400, args.vocab_size, g)
    train_loader = DataLoader(TensorDataset(X[:320], y[:320]), batch_size=args.batch_size, shuffle=True)
    X_test, y_test = X[320:], y[320:]

    model = SpamClassifier(args.vocab_size)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for counts, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(counts), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
        model.eval()
        with torch.no_grad():
            acc = ((model(X_test) > 0).float() == y_test).float().mean().item()
        print(f"epoch {epoch}: loss {total / len(train_loader):.4f} test acc {acc:.2%}")


if __name__ == "__main__":
    main()
