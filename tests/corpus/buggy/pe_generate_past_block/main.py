"""Character-level transformer language model with sinusoidal positions (the PyTorch tutorial's PositionalEncoding buffer; main.py + model.py), trained on windows of block_size = 32 and then sampled; bug in model.py: generate() appends each sampled token to the context and feeds the whole context back without cropping it to the last block_size tokens, so on the 25th sampling step (the 9-character prompt plus 24 sampled tokens: a context of 33 > 32) PositionalEncoding adds self.pe[:, :33], which still has 32 rows, to 33 positions."""

import argparse

import torch
import torch.nn.functional as F
from model import CharTransformer

TEXT = (
    "the quick brown fox jumps over the lazy dog. "
    "pack my box with five dozen liquor jugs. "
    "how vexingly quick daft zebras jump! "
) * 20


def get_batch(data, block_size, batch_size):
    ix = torch.randint(len(data) - block_size - 1, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-iters", type=int, default=40)
    parser.add_argument("--eval-interval", type=int, default=20)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--max-new-tokens", type=int, default=60)
    args = parser.parse_args()

    torch.manual_seed(1337)
    chars = sorted(set(TEXT))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for ch, i in stoi.items()}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]

    model = CharTransformer(len(chars), block_size=args.block_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for it in range(args.max_iters + 1):
        if it % args.eval_interval == 0:
            model.eval()
            with torch.no_grad():
                xv, yv = get_batch(val_data, args.block_size, args.batch_size)
                logits = model(xv)
                val_loss = F.cross_entropy(logits.view(-1, logits.size(-1)), yv.view(-1))
            model.train()
            print(f"step {it}: val loss {val_loss.item():.4f}")
        xb, yb = get_batch(train_data, args.block_size, args.batch_size)
        logits = model(xb)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), yb.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    model.eval()
    prompt = "the quick"
    context = torch.tensor([[stoi[c] for c in prompt]], dtype=torch.long)
    out = model.generate(context, max_new_tokens=args.max_new_tokens)
    print("".join(itos[i] for i in out[0].tolist()))


if __name__ == "__main__":
    main()
