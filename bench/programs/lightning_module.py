"""A LightningModule trained by a Trainer for one short epoch on a small regression set."""

import argparse

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self, features: int, hidden: int = 64, lr: float = 1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=640)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(args.samples, 16)
    y = x @ torch.randn(16) + 0.1 * torch.randn(args.samples)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)
    trainer = L.Trainer(
        max_epochs=1, accelerator="cpu", devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(Regressor(features=16), loader)
    print(f"final loss {trainer.callback_metrics['train_loss'].item():.4f}")


if __name__ == "__main__":
    main()
