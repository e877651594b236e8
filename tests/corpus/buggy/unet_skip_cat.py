"""Two-level U-Net on 30x30 images; bug: 30 -> 15 -> 7 -> 14 after pooling and upsampling, so torch.cat with the 15x15 skip connection fails."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x, skip):
        x = self.up(x)
        x = torch.cat([x, skip], dim=1)  # expect: shape_mismatch
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels=1, n_classes=1, base=8):
        super().__init__()
        self.inc = DoubleConv(n_channels, base)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(base, base * 2))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(base * 2, base * 4))
        self.up1 = Up(base * 4, base * 2)
        self.up2 = Up(base * 2, base)
        self.outc = nn.Conv2d(base, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)  # cause: shape_mismatch
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


def make_discs(n, size=30):
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    centres = torch.randint(8, size - 8, (n, 2))
    radii = torch.randint(3, 8, (n, 1, 1))
    masks = ((yy - centres[:, 0, None, None]) ** 2 + (xx - centres[:, 1, None, None]) ** 2
             <= radii**2).float().unsqueeze(1)
    images = masks + 0.3 * torch.randn_like(masks)
    return images, masks


torch.manual_seed(0)
images, masks = make_discs(32)
model = UNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    logits = model(images)
    loss = F.binary_cross_entropy_with_logits(logits, masks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
