"""Fuel-efficiency regression in the Auto MPG style (standardised numpy features, a Dataset + DataLoader, criterion = nn.MSELoss(), a held-out evaluation of the RMSE); bug: the network outputs (B, 1) and the targets are (B,), so criterion(pred, mpg) warns about the target size and broadcasts to (B, B): the model learns to predict the batch mean."""

import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def make_cars(n, rng):
    cylinders = rng.choice([4, 6, 8], size=n)
    displacement = cylinders * rng.uniform(20, 40, n)
    horsepower = displacement * rng.uniform(0.4, 0.7, n)
    weight = 1500 + 300 * cylinders + rng.normal(0, 200, n)
    year = rng.integers(70, 83, n)
    mpg = 60 - 0.006 * weight - 0.05 * horsepower + 0.5 * (year - 70) + rng.normal(0, 1.5, n)
    X = np.stack([cylinders, displacement, horsepower, weight, year], axis=1)
    return X.astype(np.float32), mpg.astype(np.float32)


class CarsDataset(Dataset):
    def __init__(self, X, y):
        self.X = torch.from_numpy(X)
        self.y = torch.from_numpy(y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


class MPGRegressor(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(n_features, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                    nn.Linear(64, 1))

    def forward(self, x):
        return self.layers(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-2)
    args = parser.parse_args()

    rng = np.random.default_rng(3)
    torch.manual_seed(3)
    X, y = make_cars(400, rng)
    X_train, X_test, y_train, y_test = X[:320], X[320:], y[:320], y[320:]
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    X_train, X_test = (X_train - mean) / std, (X_test - mean) / std
    train_loader = DataLoader(CarsDataset(X_train, y_train), batch_size=args.batch_size, shuffle=True)

    model = MPGRegressor(X.shape[1])
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for features, mpg in train_loader:
            pred = model(features)
            loss = criterion(pred, mpg)  # expect: library_warning
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item() * len(mpg)
        if epoch % 5 == 4:
            model.eval()
            with torch.no_grad():
                test_pred = model(torch.from_numpy(X_test)).squeeze(1)
                rmse = torch.sqrt(((test_pred - torch.from_numpy(y_test)) ** 2).mean())
            print(f"epoch {epoch}: train MSE {running / len(y_train):.3f} test RMSE {rmse.item():.3f}")


if __name__ == "__main__":
    main()
