"""A two-level U-Net for segmentation: one AdamW step (memory accuracy bench)."""

import torch
import torch.nn as nn


def double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1),
        nn.ReLU(),
    )


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down1, self.down2 = double_conv(1, 16), double_conv(16, 32)
        self.bottom = double_conv(32, 64)
        self.up2, self.dec2 = nn.ConvTranspose2d(64, 32, 2, stride=2), double_conv(64, 32)
        self.up1, self.dec1 = nn.ConvTranspose2d(32, 16, 2, stride=2), double_conv(32, 16)
        self.head = nn.Conv2d(16, 2, 1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(self.pool(d1))
        b = self.bottom(self.pool(d2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return self.head(u1)


model = UNet()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
images = torch.randn(4, 1, 64, 64)
masks = torch.randint(0, 2, (4, 64, 64))
loss = nn.functional.cross_entropy(model(images), masks)
loss.backward()
opt.step()
opt.zero_grad(set_to_none=True)
