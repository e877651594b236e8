"""nanoGPT-style character-level GPT training (main.py + model.py + data.py): causal -inf mask, cosine LR, grad clipping, top-k sampling (clean)."""

import argparse
import math
import time

import torch
from data import get_batch, prepare
from model import GPT, GPTConfig


def parse_args():
    parser = argparse.ArgumentParser(description="train a tiny GPT")
    parser.add_argument("--max_iters", type=int, default=20)
    parser.add_argument("--eval_interval", type=int, default=10)
    parser.add_argument("--eval_iters", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--block_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=3e-3)
    parser.add_argument("--min_lr", type=float, default=3e-4)
    parser.add_argument("--warmup_iters", type=int, default=5)
    parser.add_argument("--grad_clip", type=float, default=1.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=1337)
    return parser.parse_args()


def get_lr(it, args):
    # 1) linear warmup for warmup_iters steps
    if it < args.warmup_iters:
        return args.learning_rate * (it + 1) / (args.warmup_iters + 1)
    # 2) in between, use cosine decay down to min learning rate
    decay_ratio = (it - args.warmup_iters) / (args.max_iters - args.warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # coeff ranges 0..1
    return args.min_lr + coeff * (args.learning_rate - args.min_lr)


@torch.no_grad()
def estimate_loss(model, splits, args):
    out = {}
    model.eval()
    for split, data in splits.items():
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            X, Y = get_batch(data, args.block_size, args.batch_size, args.device)
            _, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    train_data, val_data, meta = prepare()
    config = GPTConfig(block_size=args.block_size, vocab_size=meta["vocab_size"])
    model = GPT(config).to(args.device)
    print(f"number of parameters: {model.get_num_params() / 1e3:.1f}K")
    optimizer = model.configure_optimizers(0.1, args.learning_rate, (0.9, 0.95), "cpu")

    X, Y = get_batch(train_data, args.block_size, args.batch_size, args.device)
    t0 = time.time()
    for iter_num in range(args.max_iters + 1):
        lr = get_lr(iter_num, args)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr

        if iter_num % args.eval_interval == 0:
            losses = estimate_loss(model, {"train": train_data, "val": val_data}, args)
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val {losses['val']:.4f}")

        _, loss = model(X, Y)
        # immediately async prefetch next batch while model is doing the forward pass
        X, Y = get_batch(train_data, args.block_size, args.batch_size, args.device)
        loss.backward()
        if args.grad_clip != 0.0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    print(f"trained in {time.time() - t0:.2f}s, last loss {loss.item():.4f}")
    context = torch.zeros((1, 1), dtype=torch.long, device=args.device)
    sample = model.generate(context, max_new_tokens=40, temperature=0.8, top_k=10)[0].tolist()
    print("".join(meta["itos"][i] for i in sample))


if __name__ == "__main__":
    main()
