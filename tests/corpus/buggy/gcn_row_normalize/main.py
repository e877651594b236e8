"""Two-layer GCN on a sparse block-model graph (main.py + graph.py); bug in graph.py: row-normalising without self-loops is 0/0 = NaN for isolated nodes."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from graph import row_normalize, stochastic_block_model


class GCN(nn.Module):
    def __init__(self, in_dim, hidden, n_classes, dropout=0.5):
        super().__init__()
        self.lin1 = nn.Linear(in_dim, hidden)
        self.lin2 = nn.Linear(hidden, n_classes)
        self.dropout = dropout

    def forward(self, x, adj):
        h = F.relu(adj @ self.lin1(x))
        h = F.dropout(h, self.dropout, self.training)
        return adj @ self.lin2(h)


generator = torch.Generator().manual_seed(3)
torch.manual_seed(3)
adj, labels = stochastic_block_model([40, 40, 40], p_in=0.06, p_out=0.005, generator=generator)
print("isolated nodes:", int((adj.sum(1) == 0).sum()))
features = F.one_hot(labels, 3).float() * 0.5 + torch.randn(len(labels), 3)
train_mask = torch.rand(len(labels), generator=generator) < 0.3

adj_norm = row_normalize(adj)
model = GCN(3, 16, 3)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
for epoch in range(50):
    model.train()
    out = model(features, adj_norm)
    loss = F.cross_entropy(out[train_mask], labels[train_mask])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if epoch % 10 == 0:
        model.eval()
        with torch.no_grad():
            acc = (model(features, adj_norm).argmax(1) == labels)[~train_mask].float().mean()
        print(f"epoch {epoch}: loss {loss.item():.4f} test acc {acc.item():.3f}")
