"""Bidirectional LSTM sentence classifier with pad_sequence, pack_padded_sequence(enforce_sorted=False) and padding_idx=0 (clean)."""

import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence

random.seed(0)
torch.manual_seed(0)

POSITIVE = ["good", "great", "fine", "nice", "happy"]
NEGATIVE = ["bad", "awful", "poor", "sad", "boring"]
NEUTRAL = ["the", "movie", "was", "plot", "very", "acting", "and", "really", "quite"]
vocab = ["<pad>", *POSITIVE, *NEGATIVE, *NEUTRAL]
word_to_ix = {w: i for i, w in enumerate(vocab)}


def make_sentence():
    label = random.randint(0, 1)
    words = random.choices(NEUTRAL, k=random.randint(2, 8))
    words.insert(random.randrange(len(words) + 1), random.choice(POSITIVE if label else NEGATIVE))
    return words, label


def collate(examples):
    seqs = [torch.tensor([word_to_ix[w] for w in words]) for words, _ in examples]
    lengths = torch.tensor([len(s) for s in seqs])
    padded = pad_sequence(seqs, batch_first=True, padding_value=0)
    labels = torch.tensor([label for _, label in examples])
    return padded, lengths, labels


class BiLSTMClassifier(nn.Module):
    def __init__(self, vocab_size, embedding_dim=16, hidden_dim=24, n_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden_dim, n_classes)

    def forward(self, padded, lengths):
        embedded = self.embedding(padded)  # (B, T, E)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)  # h_n: (2, B, H)
        features = torch.cat([h_n[-2], h_n[-1]], dim=1)  # (B, 2H)
        return self.fc(features)


train = [make_sentence() for _ in range(256)]
valid = [make_sentence() for _ in range(64)]
model = BiLSTMClassifier(len(vocab))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(3):
    random.shuffle(train)
    model.train()
    total_loss = 0.0
    for i in range(0, len(train), 32):
        padded, lengths, labels = collate(train[i : i + 32])
        logits = model(padded, lengths)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    model.eval()
    with torch.no_grad():
        padded, lengths, labels = collate(valid)
        preds = model(padded, lengths).argmax(dim=1)
        acc = (preds == labels).float().mean().item()
    print(f"epoch {epoch}: loss {total_loss / (len(train) // 32):.4f} valid acc {acc:.3f}")
