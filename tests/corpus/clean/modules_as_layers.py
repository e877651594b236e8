"""Review classifier whose normalisations and losses are all nn modules kept as attributes (clean): a GRU over padded reviews, attention scores squeezed from (B, T, 1) to (B, T) before self.softmax = nn.Softmax(dim=-1), -inf on the padding, nn.CrossEntropyLoss on (B, 3) ratings, an nn.LogSoftmax(dim=1) + nn.NLLLoss helpfulness head over 2 classes, nn.MSELoss on a (B, 1) length estimate against (B, 1) targets, and a last training batch of one (65 reviews, batch_size=16, drop_last=False)."""

import argparse

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD = 0


class Reviews(Dataset):
    """Reviews of 4 to 20 tokens; the rating depends on the share of 'positive' ids."""

    def __init__(self, n, vocab_size=150, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(4, 21, (1,), generator=g))
            rating = int(torch.randint(0, 3, (1,), generator=g))
            positive = torch.rand(length, generator=g) < 0.2 + 0.3 * rating
            ids = torch.where(positive, torch.randint(1, 50, (length,), generator=g),
                              torch.randint(50, vocab_size, (length,), generator=g))
            helpful = int(length > 12)
            self.items.append((ids, rating, helpful))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    ids, ratings, helpful = zip(*batch)
    lengths = torch.tensor([len(x) for x in ids], dtype=torch.float32).unsqueeze(1)  # (B, 1)
    return pad_sequence(ids, batch_first=True, padding_value=PAD), torch.tensor(ratings), torch.tensor(helpful), lengths


class ReviewModel(nn.Module):
    def __init__(self, vocab_size, embed_dim=32, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.gru = nn.GRU(embed_dim, hidden, batch_first=True)
        self.score = nn.Linear(hidden, 1)
        self.softmax = nn.Softmax(dim=-1)
        self.rating_head = nn.Linear(hidden, 3)
        self.helpful_head = nn.Linear(hidden, 2)
        self.log_softmax = nn.LogSoftmax(dim=1)
        self.length_head = nn.Linear(hidden, 1)

    def forward(self, ids):
        mask = ids != PAD
        h, _ = self.gru(self.embed(ids))
        scores = self.score(h).squeeze(-1)
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = self.softmax(scores)
        pooled = torch.bmm(weights.unsqueeze(1), h).squeeze(1)
        return self.rating_head(pooled), self.log_softmax(self.helpful_head(pooled)), self.length_head(pooled)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(Reviews(65), batch_size=args.batch_size, shuffle=True, drop_last=False,
                              collate_fn=collate)
    test_loader = DataLoader(Reviews(21, seed=1), batch_size=10, collate_fn=collate)
    model = ReviewModel(vocab_size=150)
    rating_loss = nn.CrossEntropyLoss()
    helpful_loss = nn.NLLLoss()
    length_loss = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for ids, ratings, helpful, lengths in train_loader:
            rating_logits, helpful_logp, length_pred = model(ids)
            loss = (rating_loss(rating_logits, ratings) + helpful_loss(helpful_logp, helpful)
                    + 0.01 * length_loss(length_pred, lengths))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(ratings)
        model.eval()
        correct = 0
        with torch.no_grad():
            for ids, ratings, helpful, lengths in test_loader:
                rating_logits, _, _ = model(ids)
                correct += (rating_logits.argmax(dim=1) == ratings).sum().item()
        print(f"epoch {epoch}: loss {total / len(train_loader.dataset):.4f} "
              f"test acc {correct / len(test_loader.dataset):.2%}")


if __name__ == "__main__":
    main()
