"""Train the character model: a config, a DataLoader, logs, evaluations, checkpoints, sampling."""

import argparse
import json
import os
import tempfile

import torch
from model import CharTransformer
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--config", default="config.json")
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
args = parser.parse_args()
with open(args.config) as f:
    config = json.load(f)

torch.manual_seed(0)
text = "the quick brown fox jumps over the lazy dog. " * 5
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
itos = {i: ch for ch, i in stoi.items()}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
block = config["block_size"]
windows = data.unfold(0, block + 1, 1)
n_val = len(windows) // 10
train_set = TensorDataset(windows[n_val:, :-1], windows[n_val:, 1:])
val_set = TensorDataset(windows[:n_val, :-1], windows[:n_val, 1:])
train_loader = DataLoader(train_set, batch_size=config["batch_size"], shuffle=True)
val_loader = DataLoader(val_set, batch_size=config["batch_size"])

device = torch.device(args.device)
model = CharTransformer(len(chars), config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
out_dir = tempfile.mkdtemp()


def evaluate():
    model.eval()
    losses, correct, seen = [], 0, 0
    with torch.no_grad():
        for inputs, targets in val_loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits, loss = model(inputs, targets)
            losses.append(loss.item())
            correct += (logits.argmax(-1) == targets).sum().item()
            seen += targets.numel()
    model.train()
    return sum(losses) / len(losses), correct / seen


step, best_val, bad_evals = 0, float("inf"), 0
for epoch in range(config["epochs"]):
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        logits, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        if step % config["eval_every"] == 0:
            val_loss, accuracy = evaluate()
            print(f"step {step} val {val_loss:.4f} accuracy {accuracy:.3f}")
            if val_loss < best_val:
                best_val, bad_evals = val_loss, 0
                torch.save(model.state_dict(), os.path.join(out_dir, "best.pt"))
            else:
                bad_evals += 1
        step += 1
    if bad_evals >= config["patience"]:
        print("early stop")
        break

model.eval()
context = torch.zeros((1, 1), dtype=torch.long, device=device)
sample = model.generate(context, config["sample_tokens"])[0].tolist()
print("sample:", "".join(itos[i] for i in sample))
print("done")
