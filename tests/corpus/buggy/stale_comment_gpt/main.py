"""A minGPT-style character transformer whose code carries its shapes in comments (main.py + model.py + data.py); bug: the attention scores' comment in model.py says (B, nh, T, hs), copied from the line above, where the scores are (B, nh, T, T)."""

import argparse

import torch
from data import TEXT, CharDataset
from model import GPT, ModelConfig
from torch.utils.data import DataLoader


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=12)
    parser.add_argument("--block_size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--lr", type=float, default=3e-3)
    return parser.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(0)
    dataset = CharDataset(TEXT, args.block_size)
    config = ModelConfig(vocab_size=dataset.vocab_size, block_size=args.block_size)
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=False)
    step = 0
    while step < args.steps:
        for x, y in loader:
            logits, loss = model(x, y)  # logits: (B, block_size, vocab_size)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if step >= args.steps:
                break
    prompt = torch.zeros((1, 1), dtype=torch.long)  # (1, 1)
    out = model.generate(prompt, max_new_tokens=20)[0]  # (21,)
    print("".join(sorted(dataset.stoi)[i] for i in out.tolist()))
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
