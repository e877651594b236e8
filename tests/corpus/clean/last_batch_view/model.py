"""A per-frame MLP and a bidirectional GRU for the frame labels; a small Conv1d stack for the clip label."""

import torch.nn as nn
import torch.nn.functional as F


class SpeechDetector(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_features = cfg.n_features
        self.hidden = cfg.hidden
        self.frame_encoder = nn.Sequential(nn.Linear(cfg.n_features, cfg.hidden), nn.LayerNorm(cfg.hidden), nn.GELU())
        self.gru = nn.GRU(cfg.hidden, cfg.hidden, batch_first=True, bidirectional=True)
        self.frame_head = nn.Linear(2 * cfg.hidden, 1)
        self.conv = nn.Sequential(
            nn.Conv1d(cfg.n_features, 16, kernel_size=5, padding=2), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(16, 16, kernel_size=5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(4),
        )
        self.clip_head = nn.Linear(16 * 4, 1)

    def forward(self, feats):
        B, T, _ = feats.shape
        h = self.frame_encoder(feats.reshape(B * T, self.n_features))
        h = h.reshape(B, T, self.hidden)
        h, _ = self.gru(h)
        frame_logits = self.frame_head(h).squeeze(-1)
        x = self.conv(feats.transpose(1, 2))
        x = x.view(x.size(0), -1)
        clip_logits = self.clip_head(F.dropout(x, 0.1, self.training))
        return frame_logits, clip_logits
