"""A two-level encoder-decoder: stride-2 convs down, transposed convs up, skips concatenated."""

import torch
import torch.nn as nn


def conv_block(in_channels, out_channels, stride=1):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class EncoderDecoder(nn.Module):
    def __init__(self, in_channels=3, n_classes=4, width=8):
        super().__init__()
        self.enc1 = conv_block(in_channels, width)
        self.enc2 = conv_block(width, width * 2, stride=2)
        self.enc3 = conv_block(width * 2, width * 4, stride=2)
        self.bottleneck = conv_block(width * 4, width * 4)
        self.up2 = nn.ConvTranspose2d(width * 4, width * 2, kernel_size=2, stride=2)
        self.dec2 = conv_block(width * 4, width * 2)
        self.up1 = nn.ConvTranspose2d(width * 2, width, kernel_size=2, stride=2)
        self.dec1 = conv_block(width * 2, width)
        self.head = nn.Conv2d(width, n_classes, kernel_size=1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)  # cause: shape_mismatch
        b = self.bottleneck(e3)
        d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))  # expect: shape_mismatch
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(d1)
