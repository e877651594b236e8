"""A transformers GPT-2 from a small config, fine-tuned by the library's ``Trainer``: the
training loop is the library's, and no code of the script runs in it (the dataset is a
list of dicts, batched by transformers' own collator)."""

import argparse
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.trainer_callback import PrinterCallback


def token_batches(count, length, vocab_size):
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab_size, (count, length), generator=generator)
    return [{"input_ids": row, "labels": row.clone()} for row in ids]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = GPT2Config(n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=256,
                        bos_token_id=0, eos_token_id=0)  # fmt: skip
    model = GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as output_dir:
        training = TrainingArguments(
            output_dir=output_dir, per_device_train_batch_size=args.batch_size,
            max_steps=args.steps, learning_rate=3e-4, logging_strategy="no",
            save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
        )  # fmt: skip
        dataset = token_batches(args.batch_size * args.steps, args.seq_len, config.vocab_size)
        trainer = Trainer(model=model, args=training, train_dataset=dataset)
        trainer.remove_callback(PrinterCallback)  # its metrics carry timings
        result = trainer.train()
    print(f"{result.global_step} steps, final loss {result.training_loss:.4f}")


if __name__ == "__main__":
    main()
