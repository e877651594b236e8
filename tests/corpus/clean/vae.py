"""VAE (pytorch/examples vae) on synthetic 28x28 images: reparameterization, BCE(reduction='sum') + KL divergence (clean)."""

import argparse

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

parser = argparse.ArgumentParser(description="VAE MNIST Example")
parser.add_argument("--batch-size", type=int, default=32, metavar="N")
parser.add_argument("--epochs", type=int, default=3, metavar="N")
parser.add_argument("--seed", type=int, default=1, metavar="S")
parser.add_argument("--log-interval", type=int, default=2, metavar="N")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")


def make_dataset(n):
    # strokes: each image lights up one random row and one random column
    images = torch.zeros(n, 1, 28, 28)
    rows = torch.randint(2, 26, (n,))
    cols = torch.randint(2, 26, (n,))
    for i in range(n):
        images[i, 0, rows[i], 3:25] = 1.0
        images[i, 0, 3:25, cols[i]] = 1.0
    labels = torch.zeros(n, dtype=torch.long)
    return torch.utils.data.TensorDataset(images, labels)


train_loader = torch.utils.data.DataLoader(make_dataset(128), batch_size=args.batch_size,
                                           shuffle=True, num_workers=0)
test_loader = torch.utils.data.DataLoader(make_dataset(64), batch_size=args.batch_size)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 100)
        self.fc21 = nn.Linear(100, 8)
        self.fc22 = nn.Linear(100, 8)
        self.fc3 = nn.Linear(8, 100)
        self.fc4 = nn.Linear(100, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")

    # see Appendix B from VAE paper: Kingma and Welling. Auto-Encoding Variational Bayes. 2014
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return BCE + KLD


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]"
                  f"\tLoss: {loss.item() / len(data):.6f}")

    print(f"====> Epoch: {epoch} Average loss: {train_loss / len(train_loader.dataset):.4f}")


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for data, _ in test_loader:
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()

    test_loss /= len(test_loader.dataset)
    print(f"====> Test set loss: {test_loss:.4f}")


if __name__ == "__main__":
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = torch.randn(16, 8).to(device)
            sample = model.decode(sample).cpu()
            print("sample mean intensity:", round(sample.mean().item(), 4))
