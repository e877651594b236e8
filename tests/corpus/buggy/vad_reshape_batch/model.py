"""A per-frame MLP encoder followed by a bidirectional GRU over the frames."""

import torch.nn as nn


class FrameTagger(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.batch_size = cfg.batch_size
        self.n_features = cfg.n_features
        self.hidden = cfg.hidden
        self.frame_encoder = nn.Sequential(
            nn.Linear(cfg.n_features, cfg.hidden),
            nn.LayerNorm(cfg.hidden),
            nn.GELU(),
        )
        self.gru = nn.GRU(cfg.hidden, cfg.hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * cfg.hidden, 1)

    def forward(self, feats):
        T = feats.size(1)
        # encode every frame on its own, then put the frames back in order for the GRU
        h = self.frame_encoder(feats.reshape(-1, self.n_features))
        h = h.reshape(self.batch_size, T, self.hidden)  # expect: shape_mismatch
        h, _ = self.gru(h)
        return self.head(h).squeeze(-1)
