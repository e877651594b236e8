"""LSTM sentiment classifier with an explicit initial state (init_hidden, as in the PyTorch tutorials), trained on an accelerator ('meta' stands in for 'cuda'); bug: init_hidden() makes h0 on the weights' device but c0 with a plain torch.zeros on the CPU, and nn.LSTM gets the (h0, c0) tuple with one element on each device."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

DEVICE = "cuda" if torch.cuda.is_available() else "meta"  # meta stands in for cuda here


class ReviewDataset(Dataset):
    """Token-id reviews of a fixed length; positive reviews use more of the upper vocabulary."""

    def __init__(self, n, seq_len=24, vocab_size=200, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 2, (n,), generator=g)
        low = torch.randint(1, vocab_size // 2, (n, seq_len), generator=g)
        high = torch.randint(vocab_size // 2, vocab_size, (n, seq_len), generator=g)
        pick_high = torch.rand(n, seq_len, generator=g) < (0.3 + 0.4 * self.labels.view(-1, 1))
        self.tokens = torch.where(pick_high, high, low)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


class SentimentLSTM(nn.Module):
    def __init__(self, vocab_size, embedding_dim=32, hidden_dim=64, n_layers=2, output_size=2):
        super().__init__()
        self.n_layers = n_layers
        self.hidden_dim = hidden_dim
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, n_layers, dropout=0.2, batch_first=True)
        self.dropout = nn.Dropout(0.3)
        self.fc = nn.Linear(hidden_dim, output_size)

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        h0 = weight.new_zeros(self.n_layers, batch_size, self.hidden_dim)
        c0 = torch.zeros(self.n_layers, batch_size, self.hidden_dim)  # cause: device_mismatch
        return (h0, c0)

    def forward(self, x, hidden):
        embeds = self.embedding(x)
        lstm_out, hidden = self.lstm(embeds, hidden)  # expect: device_mismatch
        out = self.fc(self.dropout(lstm_out[:, -1, :]))
        return out, hidden


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--clip", type=float, default=5.0)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(ReviewDataset(100), batch_size=args.batch_size, shuffle=True)
    valid_loader = DataLoader(ReviewDataset(40, seed=1), batch_size=args.batch_size)
    model = SentimentLSTM(vocab_size=200).to(DEVICE)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        model.train()
        for step, (inputs, labels) in enumerate(train_loader):
            inputs, labels = inputs.to(DEVICE), labels.to(DEVICE)
            hidden = model.init_hidden(inputs.size(0))
            output, hidden = model(inputs, hidden)
            loss = criterion(output, labels)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            if step % 4 == 0:
                print(f"epoch {epoch + 1} step {step}: loss {loss.item():.4f}")
        model.eval()
        correct = 0
        with torch.no_grad():
            for inputs, labels in valid_loader:
                inputs, labels = inputs.to(DEVICE), labels.to(DEVICE)
                output, _ = model(inputs, model.init_hidden(inputs.size(0)))
                correct += (F.softmax(output, dim=1).argmax(1) == labels).sum().item()
        print(f"epoch {epoch + 1}: val acc {correct / len(valid_loader.dataset):.2%}")


if __name__ == "__main__":
    main()
