"""LeNet written for 28x28 digits, trained on 32x32 colour images; bug: the flattened size 16 * 4 * 4 was worked out for 28x28 inputs (it is 16 * 5 * 5 at 32x32), and x.view(-1, 16 * 4 * 4) in forward() silently turns a batch of 16 into 25 rows (16 * 400 = 25 * 256), so the loss fails on 25 outputs for 16 labels."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1, 16 * 4 * 4)  # cause: shape_mismatch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


torch.manual_seed(0)
images = torch.rand(64, 3, 32, 32)
labels = torch.randint(0, 10, (64,))
trainloader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True)
net = LeNet()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

for epoch in range(2):
    running_loss = 0.0
    for inputs, targets in trainloader:
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)  # expect: shape_mismatch
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    print(f"[{epoch + 1}] loss: {running_loss / len(trainloader):.3f}")
