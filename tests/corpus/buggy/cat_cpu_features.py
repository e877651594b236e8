"""Matrix-factorisation recommender with an MLP over [user, item, bias] features, trained on the GPU ('meta' stands in for 'cuda' without one); bug: the constant bias column is made with torch.ones(B, 1) on the CPU and torch.cat meets it with the embeddings on the GPU."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda" if torch.cuda.is_available() else "meta"
N_USERS, N_ITEMS, DIM = 50, 80, 16


class NeuralMF(nn.Module):
    def __init__(self, n_users, n_items, dim):
        super().__init__()
        self.users = nn.Embedding(n_users, dim)
        self.items = nn.Embedding(n_items, dim)
        self.mlp = nn.Sequential(nn.Linear(2 * dim + 1, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, user, item):
        u, v = self.users(user), self.items(item)
        bias = torch.ones(u.size(0), 1)  # cause: device_mismatch
        h = torch.cat([u, v, bias], dim=1)  # expect: device_mismatch
        return self.mlp(h).squeeze(1)


torch.manual_seed(0)
users = torch.randint(0, N_USERS, (1024,))
items = torch.randint(0, N_ITEMS, (1024,))
ratings = ((users % 5) + (items % 3)).float() / 2 + 0.1 * torch.randn(1024)
loader = DataLoader(TensorDataset(users, items, ratings), batch_size=128, shuffle=True)
model = NeuralMF(N_USERS, N_ITEMS, DIM).to(DEVICE)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
for epoch in range(3):
    for user, item, rating in loader:
        user, item, rating = user.to(DEVICE), item.to(DEVICE), rating.to(DEVICE)
        loss = F.mse_loss(model(user, item), rating)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: mse {loss.item():.4f}")
