"""GRU encoder-decoder with Bahdanau attention that learns to reverse digit strings (bentrevett's pytorch-seq2seq tutorial, batch-first), with shape comments in the published forms (`# src: [B, S]` above the code, `# -> (B, S, E)`, `# Shape: (B, H)` and `# shape = [B, S]` after it) among prose comments in parentheses, a DataLoader whose last batch is smaller, teacher forcing, gradient clipping and greedy decoding of one example at a time (clean)."""

import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD, SOS, EOS = 0, 1, 2
VOCAB = 13  # the three special tokens (pad, sos, eos) and the digits 0-9


class ReverseDigits(Dataset):
    """Random digit strings of 4 to 8 digits; the target is the string reversed."""

    def __init__(self, n, seed):
        rnd = random.Random(seed)
        self.pairs = []
        for _ in range(n):
            digits = [3 + rnd.randrange(10) for _ in range(rnd.randint(4, 8))]
            self.pairs.append((digits, digits[::-1]))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        src, tgt = self.pairs[i]
        return torch.tensor(src), torch.tensor([SOS] + tgt + [EOS])


def collate(batch):
    srcs, tgts = zip(*batch)
    src = pad_sequence(srcs, batch_first=True, padding_value=PAD)  # shape = [B, S]
    tgt = pad_sequence(tgts, batch_first=True, padding_value=PAD)  # shape = [B, T]
    return src, tgt


class Encoder(nn.Module):
    def __init__(self, vocab_size, emb_dim, hidden, dropout):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.rnn = nn.GRU(emb_dim, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, hidden)  # merges both directions (as in Bahdanau et al., 2015)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        # src: [B, S]
        embedded = self.dropout(self.embedding(src))  # -> (B, S, E)
        outputs, hidden = self.rnn(embedded)  # outputs hold both directions (forward and backward)
        # the last layer's final states, forward (hidden[-2]) and backward (hidden[-1])
        hidden = torch.tanh(self.fc(torch.cat((hidden[-2], hidden[-1]), dim=1)))  # Shape: (B, H)
        return outputs, hidden


class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.attn = nn.Linear(3 * hidden, hidden)
        self.v = nn.Linear(hidden, 1, bias=False)

    def forward(self, hidden, encoder_outputs, mask):
        # encoder_outputs: [B, S, 2H]
        S = encoder_outputs.size(1)
        hidden = hidden.unsqueeze(1).repeat(1, S, 1)  # -> (B, S, H)
        energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs), dim=2)))  # -> (B, S, H)
        attention = self.v(energy).squeeze(2)  # shape = [B, S]
        # padding gets a very large negative score (not -inf, as in the tutorial)
        attention = attention.masked_fill(mask == 0, -1e10)
        return F.softmax(attention, dim=1)  # weights in (0, 1) that sum to 1 over the source


class Decoder(nn.Module):
    def __init__(self, vocab_size, emb_dim, hidden, dropout):
        super().__init__()
        self.output_dim = vocab_size
        self.attention = Attention(hidden)
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.rnn = nn.GRU(emb_dim + 2 * hidden, hidden, batch_first=True)
        self.fc_out = nn.Linear(3 * hidden + emb_dim, vocab_size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, token, hidden, encoder_outputs, mask):
        # the decoder sees one token per sequence at a time (one step of teacher forcing)
        token = token.unsqueeze(1)  # -> (B, 1)
        embedded = self.dropout(self.embedding(token))  # -> (B, 1, E)
        a = self.attention(hidden, encoder_outputs, mask).unsqueeze(1)  # -> (B, 1, S)
        weighted = torch.bmm(a, encoder_outputs)  # (B, 1, S) @ (B, S, 2H) -> (B, 1, 2H)
        rnn_input = torch.cat((embedded, weighted), dim=2)  # -> (B, 1, E + 2H)
        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))
        # Shape: (B, V)
        prediction = self.fc_out(torch.cat((output.squeeze(1), weighted.squeeze(1), embedded.squeeze(1)), dim=1))
        return prediction, hidden.squeeze(0)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, src, tgt, teacher_forcing_ratio=0.5):
        B, T = tgt.shape
        outputs = torch.zeros(B, T, self.decoder.output_dim)  # shape = [B, T, V]
        encoder_outputs, hidden = self.encoder(src)
        mask = src != PAD  # shape = [B, S]
        token = tgt[:, 0]  # the <sos> column (it is never predicted)
        for t in range(1, T):
            output, hidden = self.decoder(token, hidden, encoder_outputs, mask)
            outputs[:, t] = output
            teacher_force = random.random() < teacher_forcing_ratio  # (Williams & Zipser, 1989)
            token = tgt[:, t] if teacher_force else output.argmax(1)
        return outputs

    @torch.no_grad()
    def greedy_decode(self, src, max_len=12):
        encoder_outputs, hidden = self.encoder(src)
        mask = src != PAD
        token = torch.full((src.size(0),), SOS, dtype=torch.long)
        result = []
        for _ in range(max_len):
            output, hidden = self.decoder(token, hidden, encoder_outputs, mask)
            token = output.argmax(1)
            if token.item() == EOS:
                break
            result.append(token.item())
        return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--clip", type=float, default=1.0)
    args = parser.parse_args()

    random.seed(0)
    torch.manual_seed(0)
    train_loader = DataLoader(ReverseDigits(200, seed=0), batch_size=args.batch_size, shuffle=True,
                              drop_last=False, collate_fn=collate)
    model = Seq2Seq(Encoder(VOCAB, 16, 32, 0.1), Decoder(VOCAB, 16, 32, 0.1))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)  # ignore the <pad> targets (index 0)

    for epoch in range(args.epochs):
        model.train()
        epoch_loss = 0.0
        for src, tgt in train_loader:
            optimizer.zero_grad()
            output = model(src, tgt)
            # drop the <sos> position (index 0) before the loss
            loss = criterion(output[:, 1:].reshape(-1, VOCAB), tgt[:, 1:].reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)  # clip gradients (they explode in RNNs)
            optimizer.step()
            epoch_loss += loss.item()
        print(f"epoch {epoch}: loss {epoch_loss / len(train_loader):.3f}")

    model.eval()
    for src, tgt in ReverseDigits(3, seed=1):
        pred = model.greedy_decode(src.unsqueeze(0))
        print([d - 3 for d in src.tolist()], "->", [d - 3 for d in pred])


if __name__ == "__main__":
    main()
