"""Intent classifier with Hugging-Face-style dict batches and keyword calls throughout (clean): a collate_fn returns {"input_ids", "attention_mask", "labels"} with an int64 attention_mask (1 = token) as tokenizers do, the model is called as model(input_ids=..., attention_mask=...) and turns the mask into a bool key_padding_mask for nn.MultiheadAttention, masked mean pooling divided by the (B, 1) token count, F.cross_entropy(input=logits, target=batch["labels"]) on int64 labels, and a last batch of one (49 utterances, batch_size=16)."""

import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

PAD = 0
INTENTS = ["play_music", "set_alarm", "get_weather", "book_table"]


class UtteranceDataset(Dataset):
    def __init__(self, n, vocab_size=120, seed=0):
        rnd = random.Random(seed)
        self.examples = []
        for _ in range(n):
            label = rnd.randrange(len(INTENTS))
            lo = 1 + 25 * label
            ids = [rnd.randrange(lo, lo + 25) if rnd.random() < 0.6 else rnd.randrange(101, vocab_size)
                   for _ in range(rnd.randint(3, 12))]
            self.examples.append({"input_ids": ids, "label": label})

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


def collate(examples):
    max_len = max(len(ex["input_ids"]) for ex in examples)
    input_ids = torch.full((len(examples), max_len), PAD, dtype=torch.long)
    attention_mask = torch.zeros(len(examples), max_len, dtype=torch.long)
    for i, ex in enumerate(examples):
        n = len(ex["input_ids"])
        input_ids[i, :n] = torch.tensor(ex["input_ids"])
        attention_mask[i, :n] = 1
    labels = torch.tensor([ex["label"] for ex in examples], dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class IntentClassifier(nn.Module):
    def __init__(self, vocab_size, d_model=32, nhead=4, n_classes=len(INTENTS)):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.norm = nn.LayerNorm(d_model)
        self.classifier = nn.Linear(d_model, n_classes)

    def forward(self, input_ids, attention_mask):
        x = self.embed(input_ids)
        key_padding_mask = attention_mask == 0  # True where padded
        attn_out, _ = self.attn(query=x, key=x, value=x, key_padding_mask=key_padding_mask, need_weights=False)
        x = self.norm(x + attn_out)
        keep = attention_mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return self.classifier(pooled)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(UtteranceDataset(49), batch_size=args.batch_size, shuffle=True,
                              drop_last=False, collate_fn=collate)
    eval_loader = DataLoader(UtteranceDataset(30, seed=1), batch_size=8, collate_fn=collate)
    model = IntentClassifier(vocab_size=120)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    for epoch in range(args.epochs):
        model.train()
        for batch in train_loader:
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            loss = F.cross_entropy(input=logits, target=batch["labels"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for batch in eval_loader:
                inputs = {k: v for k, v in batch.items() if k != "labels"}
                correct += (model(**inputs).argmax(dim=-1) == batch["labels"]).sum().item()
        print(f"epoch {epoch}: loss {loss.item():.4f} eval accuracy {correct / len(eval_loader.dataset):.2%}")


if __name__ == "__main__":
    main()
