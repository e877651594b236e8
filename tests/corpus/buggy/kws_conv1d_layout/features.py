"""Log-magnitude short-time Fourier features, computed on a batch of waveforms."""

import torch


def log_spectrogram(waves, n_fft, hop):
    window = torch.hann_window(n_fft)
    frames = waves.unfold(-1, n_fft, hop)  # cause: shape_mismatch
    spec = torch.fft.rfft(frames * window, dim=-1).abs()
    return torch.log1p(spec)
