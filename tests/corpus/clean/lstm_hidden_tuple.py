"""Stateful character LSTM language model in the word_language_model style plus an LSTM classifier with an explicit (h0, c0) tuple (clean): init_hidden(bsz) builds both states with weight.new_zeros on the weights' device, the classifier sizes them from each batch (65 names, batch_size=16, drop_last=False: a last batch of one), the language model detaches its state between BPTT windows (repackage_hidden) and re-initialises it for the evaluation batch size."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

NAMES = ["anna", "bob", "carla", "dmitri", "elena", "farid", "greta", "hiro", "ines", "jonas", "kaja",
         "liam", "mila", "nora", "oskar", "pia", "quinn", "rosa", "sven", "tara", "uma", "vera", "wim"]
ORIGIN = [0, 1, 0, 2, 0, 2, 0, 2, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 2, 0, 1]


class Names(Dataset):
    """Names as fixed-length id sequences (padded with 0) and an origin label."""

    def __init__(self, n, stoi, max_len=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        picks = torch.randint(0, len(NAMES), (n,), generator=g)
        self.x = torch.zeros(n, max_len, dtype=torch.long)
        for row, k in enumerate(picks.tolist()):
            ids = [stoi[ch] for ch in NAMES[k]]
            self.x[row, : len(ids)] = torch.tensor(ids)
        self.y = torch.tensor([ORIGIN[k] for k in picks.tolist()])

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=16, nhid=32, nlayers=2, nclasses=None):
        super().__init__()
        self.nhid, self.nlayers = nhid, nlayers
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, batch_first=True)
        self.decoder = nn.Linear(nhid, nclasses or ntoken)

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return output, hidden


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data[: nbatch * bsz].view(bsz, -1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--bptt", type=int, default=10)
    parser.add_argument("--eval-batch-size", type=int, default=4)
    args = parser.parse_args()

    torch.manual_seed(0)
    chars = sorted(set("".join(NAMES)))
    stoi = {ch: i + 1 for i, ch in enumerate(chars)}
    ntoken = len(stoi) + 1

    # 1) the classifier: a fresh (h0, c0) per batch, sized by the batch itself
    classifier = RNNModel(ntoken, nclasses=3)
    loader = DataLoader(Names(65, stoi), batch_size=args.batch_size, shuffle=True, drop_last=False)
    optimizer = torch.optim.Adam(classifier.parameters(), lr=5e-3)
    for epoch in range(args.epochs):
        for x, y in loader:
            hidden = classifier.init_hidden(x.size(0))
            output, (h_n, c_n) = classifier(x, hidden)
            loss = F.cross_entropy(classifier.decoder(h_n[-1]), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"classifier epoch {epoch}: loss {loss.item():.4f}")

    # 2) the language model: one state carried across BPTT windows, as in word_language_model
    stream = torch.tensor([stoi[ch] for ch in " ".join(NAMES * 6) if ch != " "])
    train_data = batchify(stream[: int(0.8 * len(stream))], args.batch_size)
    val_data = batchify(stream[int(0.8 * len(stream)):], args.eval_batch_size)
    lm = RNNModel(ntoken)
    optimizer = torch.optim.SGD(lm.parameters(), lr=1.0)
    for epoch in range(args.epochs):
        lm.train()
        hidden = lm.init_hidden(args.batch_size)
        for i in range(0, train_data.size(1) - 1, args.bptt):
            seq_len = min(args.bptt, train_data.size(1) - 1 - i)
            data, targets = train_data[:, i : i + seq_len], train_data[:, i + 1 : i + 1 + seq_len]
            hidden = repackage_hidden(hidden)
            output, hidden = lm(data, hidden)
            loss = F.cross_entropy(lm.decoder(output).reshape(-1, ntoken), targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(lm.parameters(), 0.25)
            optimizer.step()
        lm.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            hidden = lm.init_hidden(args.eval_batch_size)
            for i in range(0, val_data.size(1) - 1, args.bptt):
                seq_len = min(args.bptt, val_data.size(1) - 1 - i)
                data, targets = val_data[:, i : i + seq_len], val_data[:, i + 1 : i + 1 + seq_len]
                output, hidden = lm(data, hidden)
                total += F.cross_entropy(lm.decoder(output).reshape(-1, ntoken), targets.reshape(-1), reduction="sum").item()
                count += targets.numel()
        print(f"lm epoch {epoch}: val loss {total / count:.3f}")


if __name__ == "__main__":
    main()
