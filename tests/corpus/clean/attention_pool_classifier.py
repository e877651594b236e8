"""GRU topic classifier with masked attention pooling (clean): (B, T, 1) scores squeezed with dim=-1 before a softmax over time, -inf on padding, position ids made on the input's device, keepdim sums of the mask, F.normalize over the feature dim, log_softmax over the classes and nll_loss, and a last batch of one whose h_n is squeezed with dim=0."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

PAD, VOCAB, N_TOPICS, MAX_LEN = 0, 120, 4, 20


class TopicClassifier(nn.Module):
    def __init__(self, emb=32, hidden=32):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, emb, padding_idx=PAD)
        self.position = nn.Embedding(MAX_LEN, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        self.score = nn.Linear(hidden, 1)
        self.out = nn.Linear(2 * hidden, N_TOPICS)

    def forward(self, tokens):
        positions = torch.arange(tokens.size(1), device=tokens.device)
        h, h_n = self.gru(self.embedding(tokens) + self.position(positions))
        pad = tokens == PAD
        scores = self.score(h).squeeze(-1).masked_fill(pad, float("-inf"))
        weights = F.softmax(scores, dim=1)
        attended = (weights.unsqueeze(-1) * h).sum(dim=1)
        keep = (~pad).float().unsqueeze(-1)
        mean = (h * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)
        features = torch.cat([F.normalize(attended, dim=-1), mean + h_n.squeeze(0)], dim=1)
        return F.log_softmax(self.out(features), dim=-1)


def documents(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    docs, topics = [], []
    for _ in range(n):
        topic = int(torch.randint(0, N_TOPICS, (1,), generator=g))
        length = int(torch.randint(3, MAX_LEN, (1,), generator=g))
        words = torch.randint(1 + topic * 30, 1 + (topic + 1) * 29, (length,), generator=g)
        docs.append(words)
        topics.append(topic)
    return docs, torch.tensor(topics)


def collate(batch):
    docs, topics = zip(*batch)
    return pad_sequence(docs, batch_first=True, padding_value=PAD), torch.stack(topics)


torch.manual_seed(0)
docs, topics = documents(97)
loader = DataLoader(list(zip(docs, topics)), batch_size=32, shuffle=True, collate_fn=collate)
model = TopicClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(3):
    for tokens, target in loader:
        log_probs = model(tokens)
        loss = F.nll_loss(log_probs, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: nll {loss.item():.4f} on a last batch of {len(target)}")
