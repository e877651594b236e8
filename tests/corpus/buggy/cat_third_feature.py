"""Click-through-rate model in the Wide & Deep style on a numpy log of (user, item, price, clicked) rows: user and item embeddings concatenated with the dense features, BCEWithLogitsLoss, a test accuracy; bug: the dense log-price feature is sliced as table[:, 2], an (N,) vector, where table[:, 2:3] keeps it (N, 1) as the label column is kept, so the batch's third tensor in torch.cat([u, v, dense], dim=1) is 1-D."""

import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def make_click_log(n_rows, n_users, n_items, rng):
    users = rng.integers(0, n_users, n_rows)
    items = rng.integers(0, n_items, n_rows)
    price = rng.lognormal(mean=2.0, sigma=0.5, size=n_rows)
    affinity = np.sin(users * 0.7) * np.cos(items * 1.3) - 0.05 * (price - 7.0)
    clicked = (affinity + 0.3 * rng.standard_normal(n_rows) > 0).astype(np.float32)
    return np.stack([users, items, price, clicked], axis=1)


class ClickDataset(Dataset):
    def __init__(self, log):
        table = torch.from_numpy(log).float()
        self.users = table[:, 0].long()
        self.items = table[:, 1].long()
        self.dense = torch.log1p(table[:, 2])  # cause: shape_mismatch
        self.clicked = table[:, 3:4]

    def __len__(self):
        return len(self.users)

    def __getitem__(self, i):
        return self.users[i], self.items[i], self.dense[i], self.clicked[i]


class WideAndDeep(nn.Module):
    def __init__(self, n_users, n_items, dim=16, n_dense=1):
        super().__init__()
        self.user_emb = nn.Embedding(n_users, dim)
        self.item_emb = nn.Embedding(n_items, dim)
        self.deep = nn.Sequential(nn.Linear(2 * dim + n_dense, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, user, item, dense):
        u = self.user_emb(user)
        v = self.item_emb(item)
        x = torch.cat([u, v, dense], dim=1)  # expect: shape_mismatch
        return self.deep(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    log = make_click_log(1000, n_users=50, n_items=40, rng=rng)
    train_ds, test_ds = ClickDataset(log[:800]), ClickDataset(log[800:])
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_ds, batch_size=256)

    model = WideAndDeep(n_users=50, n_items=40)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        for user, item, dense, clicked in train_loader:
            logits = model(user, item, dense)
            loss = criterion(logits, clicked)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            hits = 0
            for user, item, dense, clicked in test_loader:
                hits += ((model(user, item, dense) > 0).float() == clicked).sum().item()
        print(f"epoch {epoch}: loss {loss.item():.4f} test acc {hits / len(test_ds):.3f}")


if __name__ == "__main__":
    main()
