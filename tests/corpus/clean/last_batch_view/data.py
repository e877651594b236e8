"""Synthetic clips: log-energy filterbank frames with speech bursts, labelled per frame."""

import torch
from torch.utils.data import DataLoader, Dataset


class SpeechClips(Dataset):
    def __init__(self, n_clips, n_frames, n_features, seed):
        g = torch.Generator().manual_seed(seed)
        starts = torch.randint(0, n_frames // 2, (n_clips, 1), generator=g)
        lengths = torch.randint(0, n_frames // 2, (n_clips, 1), generator=g)
        t = torch.arange(n_frames).unsqueeze(0)
        self.labels = ((t >= starts) & (t < starts + lengths)).float()
        energy = 2.0 * self.labels.unsqueeze(-1) * torch.rand(1, 1, n_features, generator=g)
        self.feats = energy + torch.randn(n_clips, n_frames, n_features, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.feats[i], self.labels[i]


def make_loaders(cfg):
    train = SpeechClips(cfg.n_clips, cfg.n_frames, cfg.n_features, seed=cfg.seed)
    val = SpeechClips(cfg.n_val_clips, cfg.n_frames, cfg.n_features, seed=cfg.seed + 1)
    train_loader = DataLoader(train, batch_size=cfg.batch_size, shuffle=True, drop_last=False)
    val_loader = DataLoader(val, batch_size=cfg.batch_size, shuffle=False)
    return train_loader, val_loader
