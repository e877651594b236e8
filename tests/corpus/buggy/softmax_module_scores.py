"""Document classifier with a BiLSTM and additive attention pooling (the HAN word-attention layer) whose softmax is an nn.Softmax module kept as an attribute; bug: the attention scores are (B, T, 1) and self.softmax = nn.Softmax(dim=-1) normalises over that size-1 dim, so every weight is exactly 1 and the pooled "context" is a plain sum over time."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class NewsDataset(Dataset):
    """Token-id documents of 30 tokens; each topic repeats a few keywords at random positions."""

    def __init__(self, n, vocab_size=300, n_topics=4, seq_len=30, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, n_topics, (n,), generator=g)
        self.docs = torch.randint(n_topics * 10, vocab_size, (n, seq_len), generator=g)
        keyword_pos = torch.rand(n, seq_len, generator=g) < 0.15
        keywords = self.labels.view(-1, 1) * 10 + torch.randint(0, 10, (n, seq_len), generator=g)
        self.docs = torch.where(keyword_pos, keywords, self.docs)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.docs[i], self.labels[i]


class AttentionPooling(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)
        self.context = nn.Linear(hidden, 1, bias=False)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, h):
        u = torch.tanh(self.proj(h))
        scores = self.context(u)
        weights = self.softmax(scores)  # expect: degenerate_op
        return (weights * h).sum(dim=1), weights


class BiLSTMAttention(nn.Module):
    def __init__(self, vocab_size, embed_dim=32, hidden=32, n_classes=4):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden, batch_first=True, bidirectional=True)
        self.attention = AttentionPooling(2 * hidden)
        self.fc = nn.Linear(2 * hidden, n_classes)

    def forward(self, docs):
        h, _ = self.lstm(self.embedding(docs))
        context, _ = self.attention(h)
        return self.fc(context)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(NewsDataset(128), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(NewsDataset(64, seed=1), batch_size=64)
    model = BiLSTMAttention(vocab_size=300)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for docs, labels in train_loader:
            loss = criterion(model(docs), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        model.eval()
        with torch.no_grad():
            docs, labels = next(iter(test_loader))
            acc = (model(docs).argmax(1) == labels).float().mean().item()
        print(f"epoch {epoch}: loss {total / len(train_loader):.4f} test acc {acc:.2%}")


if __name__ == "__main__":
    main()
