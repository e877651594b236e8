"""DCGAN (pytorch/examples dcgan, main.py + models.py) on synthetic 16x16 images, BCELoss on netD(x).view(-1) against filled label vectors (clean)."""

import argparse
import random

import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data
from models import Discriminator, Generator, weights_init

parser = argparse.ArgumentParser()
parser.add_argument("--batchSize", type=int, default=16, help="input batch size")
parser.add_argument("--nz", type=int, default=8, help="size of the latent z vector")
parser.add_argument("--ngf", type=int, default=8)
parser.add_argument("--ndf", type=int, default=8)
parser.add_argument("--niter", type=int, default=2, help="number of epochs to train for")
parser.add_argument("--lr", type=float, default=0.0002, help="learning rate, default=0.0002")
parser.add_argument("--beta1", type=float, default=0.5, help="beta1 for adam. default=0.5")
parser.add_argument("--manualSeed", type=int, default=999, help="manual seed")
opt = parser.parse_args()
print(opt)

random.seed(opt.manualSeed)
torch.manual_seed(opt.manualSeed)

# a fake "dataset": soft blobs in [-1, 1], 3 channels
n_images = 64
yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
centers = torch.randint(4, 12, (n_images, 2)).float()
d2 = (yy - centers[:, 0].view(-1, 1, 1)) ** 2 + (xx - centers[:, 1].view(-1, 1, 1)) ** 2
images = torch.exp(-d2 / 8.0).unsqueeze(1).repeat(1, 3, 1, 1) * 2 - 1
dataset = torch.utils.data.TensorDataset(images, torch.zeros(n_images))
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=True,
                                         num_workers=0)

device = torch.device("cpu")
nz = int(opt.nz)
nc = 3

netG = Generator(nz, opt.ngf, nc).to(device)
netG.apply(weights_init)
netD = Discriminator(nc, opt.ndf).to(device)
netD.apply(weights_init)

criterion = nn.BCELoss()

fixed_noise = torch.randn(opt.batchSize, nz, 1, 1, device=device)
real_label = 1
fake_label = 0

# setup optimizer
optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        # train with real
        netD.zero_grad()
        real_cpu = data[0].to(device)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)

        output = netD(real_cpu).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        # train with fake
        noise = torch.randn(batch_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        print(
            f"[{epoch}/{opt.niter}][{i}/{len(dataloader)}] Loss_D: {errD.item():.4f} "
            f"Loss_G: {errG.item():.4f} D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}"
        )

with torch.no_grad():
    fake = netG(fixed_noise)
print("generated batch:", tuple(fake.shape), "range", fake.min().item(), fake.max().item())
