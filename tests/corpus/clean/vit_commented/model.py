"""ViT: patch embedding by a strided Conv2d, a class token, learned positions, pre-norm blocks."""

import torch
import torch.nn as nn


class PatchEmbed(nn.Module):
    def __init__(self, img_size, patch_size, in_chans, embed_dim):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):  # x: [B, C, H, W]
        # (B, C, H, W) -> (B, N, D): one token per patch (non-overlapping, stride = patch size)
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5  # 1 / sqrt(head dim) (Vaswani et al., 2017)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape  # N counts the class token too (N = num_patches + 1)
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)  # shape = [B, heads, N, N]
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)  # -> (B, N, C)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))  # pre-norm residual (as in timm)
        x = x + self.mlp(self.norm2(x))
        return x


class VisionTransformer(nn.Module):
    def __init__(self, img_size, patch_size, in_chans, num_classes, embed_dim, depth, num_heads):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, embed_dim) * 0.02)
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):  # x: [B, 3, H, W]
        B = x.shape[0]
        x = self.patch_embed(x)  # Shape: (B, N, D)
        cls_tokens = self.cls_token.expand(B, -1, -1)  # -> (B, 1, D)
        x = torch.cat((cls_tokens, x), dim=1)  # -> (B, N + 1, D)
        x = x + self.pos_embed  # learned positions (one per token, the class token included)
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        # classify from the class token (index 0), as in Dosovitskiy et al. (2021)
        return self.head(x[:, 0])  # -> (B, num_classes)
