"""A transformers GPT-2 built from a small config, trained for a few steps on random
token batches with the library's own loss, as a fine-tuning script does."""

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=64)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = GPT2Config(n_layer=2, n_head=4, n_embd=128, n_positions=128, vocab_size=1000)
    model = GPT2LMHeadModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model.train()
    for step in range(args.steps):
        input_ids = torch.randint(0, config.vocab_size, (args.batch_size, args.seq_len))
        attention_mask = torch.ones_like(input_ids)
        outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids)
        outputs.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step} loss {outputs.loss.item():.4f}")


if __name__ == "__main__":
    main()
