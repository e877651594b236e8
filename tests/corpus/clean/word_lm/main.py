"""Word-level LM (pytorch/examples word_language_model, main.py + model.py + data.py): LSTM and Transformer with log(tril) masks, repackage_hidden (clean)."""

import argparse
import math
import time

import torch
import torch.nn as nn
from data import Corpus
from model import RNNModel, TransformerModel

parser = argparse.ArgumentParser(description="PyTorch word-level language model")
parser.add_argument("--models", type=str, default="LSTM,Transformer",
                    help="comma-separated: RNN_TANH, RNN_RELU, LSTM, GRU, Transformer")
parser.add_argument("--emsize", type=int, default=32, help="size of word embeddings")
parser.add_argument("--nhid", type=int, default=32, help="number of hidden units per layer")
parser.add_argument("--nlayers", type=int, default=2, help="number of layers")
parser.add_argument("--lr", type=float, default=5.0, help="initial learning rate")
parser.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
parser.add_argument("--epochs", type=int, default=2, help="upper epoch limit")
parser.add_argument("--batch_size", type=int, default=10, metavar="N", help="batch size")
parser.add_argument("--bptt", type=int, default=12, help="sequence length")
parser.add_argument("--dropout", type=float, default=0.2, help="dropout applied to layers")
parser.add_argument("--tied", action="store_true", help="tie the word embedding and softmax")
parser.add_argument("--seed", type=int, default=1111, help="random seed")
parser.add_argument("--log-interval", type=int, default=10, metavar="N", help="report interval")
parser.add_argument("--nhead", type=int, default=2, help="heads in the transformer model")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")

corpus = Corpus()


def batchify(data, bsz):
    # Work out how cleanly we can divide the dataset into bsz parts.
    nbatch = data.size(0) // bsz
    # Trim off any extra elements that wouldn't cleanly fit (remainders).
    data = data.narrow(0, 0, nbatch * bsz)
    # Evenly divide the data across the bsz batches.
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


eval_batch_size = 10
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)
ntokens = len(corpus.dictionary)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def evaluate(model, data_source):
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.0
    if not isinstance(model, TransformerModel):
        hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            if isinstance(model, TransformerModel):
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train(model, lr, epoch):
    # Turn on training mode which enables dropout.
    model.train()
    total_loss = 0.0
    start_time = time.time()
    if not isinstance(model, TransformerModel):
        hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        model.zero_grad()
        if isinstance(model, TransformerModel):
            output = model(data)
            output = output.view(-1, ntokens)
        else:
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()

        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)

        total_loss += loss.item()

        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start_time
            print(
                f"| epoch {epoch:3d} | {batch:5d} batches | lr {lr:02.2f} | "
                f"ms/batch {elapsed * 1000 / args.log_interval:5.2f} | "
                f"loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}"
            )
            total_loss = 0
            start_time = time.time()


for model_type in args.models.split(","):
    if model_type == "Transformer":
        model = TransformerModel(
            ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout
        ).to(device)
    else:
        model = RNNModel(
            model_type, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied
        ).to(device)
    lr = args.lr if model_type != "Transformer" else args.lr / 5
    best_val_loss = None
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        train(model, lr, epoch)
        val_loss = evaluate(model, val_data)
        print(
            f"| {model_type} end of epoch {epoch:3d} | time: {time.time() - epoch_start_time:5.2f}s"
            f" | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}"
        )
        if not best_val_loss or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            # Anneal the learning rate if no improvement has been seen in the validation dataset.
            lr /= 4.0
    test_loss = evaluate(model, test_data)
    print(f"| {model_type} end of training | test loss {test_loss:5.2f} | "
          f"test ppl {math.exp(test_loss):8.2f}")
