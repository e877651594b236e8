"""Encoder-decoder segmentation net with skip connections on 50x50 tiles (main.py + model.py); bug: the second stride-2 conv meets an odd size (50 -> 25 -> 13), the decoder upsamples 13 to 26, and torch.cat with the 25x25 skip connection fails."""

import argparse

import torch
import torch.nn.functional as F
from model import EncoderDecoder


def synthetic_tiles(n, size, n_classes, seed=0):
    """Rectangles of random classes on a noisy background; the mask labels their pixels."""
    g = torch.Generator().manual_seed(seed)
    masks = torch.zeros(n, size, size, dtype=torch.long)
    for i in range(n):
        for _ in range(3):
            y0, x0 = torch.randint(0, size - 10, (2,), generator=g).tolist()
            h, w = torch.randint(5, 10, (2,), generator=g).tolist()
            masks[i, y0 : y0 + h, x0 : x0 + w] = int(torch.randint(1, n_classes, (1,), generator=g))
    images = F.one_hot(masks, n_classes).permute(0, 3, 1, 2).float()[:, 1:]
    images = images + 0.3 * torch.randn(images.shape, generator=g)
    return images, masks


parser = argparse.ArgumentParser()
parser.add_argument("--size", type=int, default=50)
parser.add_argument("--classes", type=int, default=4)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

torch.manual_seed(0)
images, masks = synthetic_tiles(8, args.size, args.classes)
model = EncoderDecoder(in_channels=args.classes - 1, n_classes=args.classes)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(args.steps):
    logits = model(images)
    loss = F.cross_entropy(logits, masks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
