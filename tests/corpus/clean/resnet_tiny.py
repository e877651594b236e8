"""Tiny ResNet (BasicBlock, BatchNorm2d, residual add) on synthetic images with torch.where augmentation, SGD + nesterov and cosine LR (clean)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class TinyResNet(nn.Module):
    def __init__(self, num_classes=4, widths=(8, 16, 32)):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
        )
        layers = []
        inplanes = widths[0]
        for i, planes in enumerate(widths):
            layers.append(BasicBlock(inplanes, planes, stride=1 if i == 0 else 2))
            inplanes = planes
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[-1], num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.stem(x)
        x = self.layers(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def make_images(n):
    """Class = which quadrant holds a bright square; colour jitter per image."""
    labels = torch.randint(0, 4, (n,))
    images = 0.2 * torch.randn(n, 3, 16, 16)
    for i, c in enumerate(labels.tolist()):
        r, q = divmod(c, 2)
        images[i, :, r * 8 + 2 : r * 8 + 6, q * 8 + 2 : q * 8 + 6] += 1.0
    color = 1.0 + 0.1 * torch.randn(n, 3, 1, 1)
    return images * color, labels


def random_mirror_halves(x):
    # a plain horizontal flip would move the square to another quadrant (another class);
    # mirroring each half on its own keeps the class
    flip = torch.rand(x.size(0), 1, 1, 1) < 0.5
    mirrored = torch.cat([x[..., :8].flip(-1), x[..., 8:].flip(-1)], dim=-1)
    return torch.where(flip, mirrored, x)


train_x, train_y = make_images(256)
test_x, test_y = make_images(128)
mean = train_x.mean(dim=(0, 2, 3), keepdim=True)
std = train_x.std(dim=(0, 2, 3), keepdim=True)

model = TinyResNet()
epochs, batch_size = 3, 64
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                            weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
for epoch in range(epochs):
    model.train()
    perm = torch.randperm(len(train_x))
    for i in range(0, len(train_x), batch_size):
        idx = perm[i : i + batch_size]
        xb = random_mirror_halves((train_x[idx] - mean) / std)
        loss = F.cross_entropy(model(xb), train_y[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    scheduler.step()

    model.eval()
    with torch.no_grad():
        logits = model((test_x - mean) / std)
        acc = (logits.argmax(1) == test_y).float().mean().item()
    lr = scheduler.get_last_lr()[0]
    print(f"epoch {epoch}: loss {loss.item():.4f} test acc {acc:.3f} lr {lr:.4f}")
