"""Intent classifier over variable-length utterances: a Dataset of dicts, a collate_fn that pads and returns a dict batch, nn.MultiheadAttention with a key_padding_mask and masked mean pooling; bug: collate() builds the padding mask as torch.zeros(..., dtype=torch.long) with 1 at the pads, and model(batch["input_ids"], batch["padding_mask"]) hands that int64 mask to nn.MultiheadAttention, which takes only a bool or float key_padding_mask."""

import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

PAD = 0
INTENTS = ["play_music", "set_alarm", "get_weather", "book_table"]


class UtteranceDataset(Dataset):
    """Token-id utterances of 3 to 12 tokens; each intent draws from its own keyword range."""

    def __init__(self, n, vocab_size=120, seed=0):
        rnd = random.Random(seed)
        self.examples = []
        for _ in range(n):
            label = rnd.randrange(len(INTENTS))
            length = rnd.randint(3, 12)
            lo = 1 + 25 * label
            ids = [rnd.randrange(lo, lo + 25) if rnd.random() < 0.6 else rnd.randrange(101, vocab_size)
                   for _ in range(length)]
            self.examples.append({"input_ids": ids, "label": label})

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


def collate(examples):
    max_len = max(len(ex["input_ids"]) for ex in examples)
    input_ids = torch.full((len(examples), max_len), PAD, dtype=torch.long)
    padding_mask = torch.zeros(len(examples), max_len, dtype=torch.long)  # cause: dtype_mismatch
    for i, ex in enumerate(examples):
        n = len(ex["input_ids"])
        input_ids[i, :n] = torch.tensor(ex["input_ids"])
        padding_mask[i, n:] = 1
    labels = torch.tensor([ex["label"] for ex in examples])
    return {"input_ids": input_ids, "padding_mask": padding_mask, "labels": labels}


class IntentClassifier(nn.Module):
    def __init__(self, vocab_size, d_model=32, nhead=4, n_classes=len(INTENTS)):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.norm = nn.LayerNorm(d_model)
        self.classifier = nn.Linear(d_model, n_classes)

    def forward(self, input_ids, padding_mask):
        x = self.embed(input_ids)
        attn_out, _ = self.attn(x, x, x, key_padding_mask=padding_mask)  # expect: dtype_mismatch
        x = self.norm(x + attn_out)
        keep = (input_ids != PAD).unsqueeze(-1).float()
        pooled = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return self.classifier(pooled)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(UtteranceDataset(200), batch_size=args.batch_size, shuffle=True,
                              collate_fn=collate)
    eval_loader = DataLoader(UtteranceDataset(60, seed=1), batch_size=32, collate_fn=collate)
    model = IntentClassifier(vocab_size=120)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    for epoch in range(args.epochs):
        model.train()
        for step, batch in enumerate(train_loader):
            logits = model(batch["input_ids"], batch["padding_mask"])
            loss = F.cross_entropy(logits, batch["labels"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 5 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}")
        model.eval()
        correct = 0
        with torch.no_grad():
            for batch in eval_loader:
                preds = model(batch["input_ids"], batch["padding_mask"]).argmax(dim=-1)
                correct += (preds == batch["labels"]).sum().item()
        print(f"epoch {epoch}: eval accuracy {correct / len(eval_loader.dataset):.2%}")


if __name__ == "__main__":
    main()
