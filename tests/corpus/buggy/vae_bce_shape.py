"""Conv-encoder VAE; bug: F.binary_cross_entropy gets the (B, 784) reconstruction and the (B, 1, 28, 28) images (the x.view(-1, 784) was dropped)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class VAE(nn.Module):
    def __init__(self, latent=8):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 8, 4, stride=2, padding=1), nn.ReLU(),  # 14x14
            nn.Conv2d(8, 16, 4, stride=2, padding=1), nn.ReLU(),  # 7x7
            nn.Flatten(),
        )
        self.fc_mu = nn.Linear(16 * 7 * 7, latent)
        self.fc_logvar = nn.Linear(16 * 7 * 7, latent)
        self.decoder = nn.Sequential(nn.Linear(latent, 128), nn.ReLU(), nn.Linear(128, 784),
                                     nn.Sigmoid())

    def forward(self, x):
        h = self.encoder(x)
        mu, logvar = self.fc_mu(h), self.fc_logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.decoder(z), mu, logvar


def vae_loss(recon, x, mu, logvar):
    bce = F.binary_cross_entropy(recon, x, reduction="sum")  # expect: shape_mismatch
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + kld) / x.size(0)


torch.manual_seed(0)
images = (torch.rand(96, 1, 28, 28) > 0.8).float()
loader = DataLoader(TensorDataset(images), batch_size=32, shuffle=True)
model = VAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    for (x,) in loader:
        recon, mu, logvar = model(x)
        loss = vae_loss(recon, x, mu, logvar)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.2f}")
