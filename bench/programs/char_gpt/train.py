"""Train a character-level GPT on a list of names, as makemore does: a dataset of
(prefix, next characters) pairs, a shuffling DataLoader, AdamW, the loss logged."""

import argparse
import random
import time

import torch
from torch.utils.data import DataLoader, Dataset

from model import ModelConfig, Transformer

SYLLABLES = ["an", "el", "ri", "so", "ma", "ka", "le", "ny", "th", "or", "is", "ve", "ja", "mi"]


class CharDataset(Dataset):
    def __init__(self, words, chars, max_word_length):
        self.words = words
        self.chars = chars
        self.max_word_length = max_word_length
        self.stoi = {ch: i + 1 for i, ch in enumerate(chars)}

    def __len__(self):
        return len(self.words)

    def get_vocab_size(self):
        return len(self.chars) + 1  # all the characters and the special 0 token

    def get_output_length(self):
        return self.max_word_length + 1  # <START> token followed by the word

    def encode(self, word):
        return torch.tensor([self.stoi[w] for w in word], dtype=torch.long)

    def __getitem__(self, idx):
        word = self.words[idx]
        ix = self.encode(word)
        x = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        y = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        x[1 : 1 + len(ix)] = ix
        y[: len(ix)] = ix
        y[len(ix) + 1 :] = -1  # index -1 masks the loss at the inactive locations
        return x, y


def make_words(count, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(count)]


def create_datasets(words):
    chars = sorted(set("".join(words)))
    max_word_length = max(len(w) for w in words)
    test_size = min(100, int(len(words) * 0.1))
    order = torch.randperm(len(words)).tolist()
    train_words = [words[i] for i in order[:-test_size]]
    test_words = [words[i] for i in order[-test_size:]]
    return (
        CharDataset(train_words, chars, max_word_length),
        CharDataset(test_words, chars, max_word_length),
    )


@torch.no_grad()
def evaluate(model, dataset, batch_size=50):
    model.eval()
    loader = DataLoader(dataset, shuffle=False, batch_size=batch_size)
    losses = []
    for x, y in loader:
        _, loss = model(x, y)
        losses.append(loss.item())
    model.train()
    return sum(losses) / len(losses)


def main():
    parser = argparse.ArgumentParser(description="makemore, character level")
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--max-steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=3407)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    train_dataset, test_dataset = create_datasets(make_words(args.words, args.seed))
    config = ModelConfig(
        block_size=train_dataset.get_output_length(),
        vocab_size=train_dataset.get_vocab_size(),
    )
    model = Transformer(config)
    print(f"model #params: {sum(p.numel() for p in model.parameters())}")
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=args.learning_rate, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8
    )
    loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True, drop_last=False)

    step = 0
    while step < args.max_steps:
        for X, Y in loader:
            t0 = time.time()
            logits, loss = model(X, Y)
            model.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            t1 = time.time()
            if step % 10 == 0:
                print(f"step {step} | loss {loss.item():.4f} | step time {(t1 - t0) * 1000:.2f}ms")
            step += 1
            if step >= args.max_steps:
                break
    print(f"test loss {evaluate(model, test_dataset):.4f}")


if __name__ == "__main__":
    main()
