"""GRU character language model decoded with beam search: beam scores initialised to NEG_INF except beam 0, finished beams frozen, length-normalised ranking (clean)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

NEG_INF = float("-inf")
WORDS = ["tensor", "torch", "gradient", "broadcast", "shape", "device", "kernel", "batch"]
BOS, EOS = 0, 1
chars = sorted(set("".join(WORDS)))
stoi = {c: i + 2 for i, c in enumerate(chars)}
itos = {i: c for c, i in stoi.items()}
VOCAB = len(chars) + 2


def encode(word):
    return [BOS] + [stoi[c] for c in word] + [EOS]


class CharGRU(nn.Module):
    def __init__(self, vocab, emb=16, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens, h=None):
        out, h = self.gru(self.embed(tokens), h)
        return self.out(out), h


model = CharGRU(VOCAB)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
seqs = [torch.tensor(encode(w)) for w in WORDS]
batch = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=EOS)
for step in range(150):
    logits, _ = model(batch[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"train loss {loss.item():.4f}")


@torch.no_grad()
def beam_search(model, beam_size=4, max_len=12, alpha=0.7):
    tokens = torch.full((beam_size, 1), BOS)
    # all beams start identical: keep only beam 0 alive for the first expansion
    scores = torch.full((beam_size,), NEG_INF)
    scores[0] = 0.0
    finished = torch.zeros(beam_size, dtype=torch.bool)
    h = None
    for _ in range(max_len):
        logits, h = model(tokens[:, -1:], h)
        log_probs = F.log_softmax(logits[:, -1], dim=-1)  # (beam, V)
        # a finished beam can only emit EOS again, at no cost
        log_probs[finished] = NEG_INF
        log_probs[finished, EOS] = 0.0
        candidates = (scores.unsqueeze(1) + log_probs).view(-1)  # (beam * V,)
        scores, flat = candidates.topk(beam_size)
        beam_idx, token_idx = flat // VOCAB, flat % VOCAB
        tokens = torch.cat([tokens[beam_idx], token_idx.unsqueeze(1)], dim=1)
        h = h[:, beam_idx]
        finished = finished[beam_idx] | (token_idx == EOS)
        if finished.all():
            break
    lengths = (tokens != EOS).sum(dim=1).float()
    normalised = scores / lengths**alpha
    order = normalised.argsort(descending=True)
    return [("".join(itos.get(int(t), "") for t in tokens[i, 1:]), normalised[i].item())
            for i in order]


for word, score in beam_search(model):
    print(f"{word:12s} {score:.3f}")
