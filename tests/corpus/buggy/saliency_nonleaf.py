"""Gradient saliency map of a small CNN; bug: the input is normalised after requires_grad_(), so it is not a leaf, torch warns that its .grad is not populated and .grad is None."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def make_images(n):
    """Class 1 images have a bright vertical bar, class 0 a horizontal one."""
    labels = torch.randint(0, 2, (n,))
    images = 0.1 * torch.rand(n, 1, 16, 16)
    for i, c in enumerate(labels.tolist()):
        if c:
            images[i, 0, 3:13, 7:9] += 0.9
        else:
            images[i, 0, 7:9, 3:13] += 0.9
    return images, labels


model = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(16, 2),
)
images, labels = make_images(128)
mean, std = images.mean(), images.std()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(5):
    loss = F.cross_entropy(model((images - mean) / std), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"train loss {loss.item():.4f}")

# saliency: d(class score) / d(input pixel) for one test image
model.eval()
image, label = make_images(1)
image = image.requires_grad_()
image = (image - mean) / std
score = model(image)[0, label.item()]
score.backward()
saliency = image.grad.abs().squeeze()  # expect: library_warning
print("most salient pixel:", divmod(int(saliency.argmax()), 16))
