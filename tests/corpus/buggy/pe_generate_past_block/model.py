"""A small decoder-only transformer: token embedding, sinusoidal positional encoding buffer,
nn.TransformerEncoder layers with a causal mask, and a language-model head."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        T = x.size(1)
        x = x + self.pe[:, :T]  # expect: shape_mismatch
        return self.dropout(x)


class CharTransformer(nn.Module):
    def __init__(self, vocab_size, block_size, d_model=32, nhead=4, num_layers=2):
        super().__init__()
        self.block_size = block_size
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model, max_len=block_size)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model,
                                           dropout=0.1, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, idx):
        T = idx.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        x = self.pos_encoder(self.embed(idx) * math.sqrt(self.d_model))
        x = self.transformer(x, mask=mask, is_causal=True)
        return self.lm_head(x)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0):
        for _ in range(max_new_tokens):
            logits = self(idx)
            probs = F.softmax(logits[:, -1, :] / temperature, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)  # cause: shape_mismatch
        return idx
