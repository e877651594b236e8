"""MoCo-style contrastive pre-training (a momentum key encoder and a queue of negative keys) on synthetic 8x8 images; bug: _dequeue_and_enqueue() dropped MoCo's `assert self.K % batch_size == 0` while the DataLoader keeps the last batch of 4 (100 images, batch 16, K = 64): epoch 1 runs, its last batch leaves queue_ptr at 36, and in epoch 2 the second batch is written at 52, where the queue has 12 columns left for 16 keys."""

import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class TwoCropsDataset(Dataset):
    """Each item is two random augmentations (noise, flip, brightness) of the same image."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.rand(n, 3, 8, 8, generator=g)

    def augment(self, img):
        if torch.rand(1).item() < 0.5:
            img = img.flip(-1)
        img = img * (0.8 + 0.4 * torch.rand(1)) + 0.05 * torch.randn_like(img)
        return img

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = self.images[i]
        return self.augment(img), self.augment(img)


def make_encoder(dim):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, dim),
    )


class MoCo(nn.Module):
    def __init__(self, dim=32, K=64, m=0.99, T=0.1):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = make_encoder(dim)
        self.encoder_k = copy.deepcopy(self.encoder_q)
        for param_k in self.encoder_k.parameters():
            param_k.requires_grad = False
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        # replace the keys at ptr (dequeue and enqueue)
        self.queue[:, ptr : ptr + batch_size] = keys.T  # expect: shape_mismatch
        ptr = (ptr + batch_size) % self.K  # move pointer
        self.queue_ptr[0] = ptr

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)  # queries: NxC
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = F.normalize(self.encoder_k(im_k), dim=1)  # keys: NxC
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)  # positive logits: Nx1
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])  # negative logits: NxK
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)  # positives are the 0-th
        self._dequeue_and_enqueue(k)
        return logits, labels


def main():
    parser = argparse.ArgumentParser(description="MoCo pre-training")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--moco-k", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.03)
    args = parser.parse_args()

    torch.manual_seed(0)
    loader = DataLoader(TwoCropsDataset(100), batch_size=args.batch_size, shuffle=True, drop_last=False)
    model = MoCo(K=args.moco_k)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    for epoch in range(args.epochs):
        model.train()
        running, top1 = 0.0, 0
        for i, (im_q, im_k) in enumerate(loader):
            output, target = model(im_q=im_q, im_k=im_k)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            top1 += (output.argmax(1) == target).sum().item()
        print(f"epoch {epoch}: loss {running / len(loader):.4f} acc@1 {top1 / len(loader.dataset):.2%}")


if __name__ == "__main__":
    main()
