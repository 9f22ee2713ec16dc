# A real PyTorch Lightning run (issue 39: "the model diverges on a real Lightning bf16 LM run under
# expandable_segments:True,max_split_size_mb:128"), recorded from the process's start for the fidelity and
# plain-replay checks. Lightning itself (lightning 2.6, lightning_utilities, torchmetrics, from their
# public sources; the device has no package index) is put on PYTHONPATH by scripts/record_lightning_h200.sh.
#
# What Lightning adds to a hand-written loop, all in the recording: Trainer.setup's and teardown's
# torch.cuda.empty_cache() with cuBLAS's workspaces cleared first (fabric/accelerators/cuda.py
# _clear_cuda_memory), the sanity-check validation before training, bf16-mixed autocast, gradient
# accumulation and clipping through its loops, a ModelCheckpoint save (state copied to the host), the model
# and optimizer moved to the CPU at the end of fit, and a trainer.validate() after it that moves them back.
#
# usage: python3 record_lightning_h200.py OUTDIR TAG   (PYTORCH_CUDA_ALLOC_CONF / FRACTION from the environment)
import os, random, sys, tempfile, time
import torch

import lightning as L
from record_unseen_h200 import dump_recording
from torch.utils.data import DataLoader, Dataset, Sampler


class VarlenBatches(Sampler):
    # Batches of one sequence length each, the length drawn per batch with the token budget fixed (the
    # shape varies, as with a length-bucketing sampler).
    def __init__(self, batches, seed, budget=24576, lengths=(96, 200, 384, 512, 700, 1024, 1500, 2048)):
        rng = random.Random(seed)
        self.shapes = [(max(1, budget // s), s) for s in (rng.choice(lengths) for _ in range(batches))]

    def __iter__(self):
        for bs, seq in self.shapes:
            yield [(seq, i) for i in range(bs)]

    def __len__(self):
        return len(self.shapes)


class Tokens(Dataset):
    def __getitem__(self, key):
        seq, i = key
        g = torch.Generator().manual_seed(seq * 100003 + i)
        return torch.randint(0, 32000, (seq,), generator=g)

    def __len__(self):
        return 1 << 30


class CausalLM(L.LightningModule):
    def __init__(self):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        cfg = GPT2Config(n_layer=8, n_embd=1024, n_head=16, n_positions=2048, vocab_size=32000)
        self.lm = GPT2LMHeadModel(cfg)

    def training_step(self, batch, _):
        loss = self.lm(batch, labels=batch).loss
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, _):
        self.log("val_loss", self.lm(batch, labels=batch).loss)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def loader(batches, seed):
    return DataLoader(Tokens(), batch_sampler=VarlenBatches(batches, seed), pin_memory=True, num_workers=0)


def main():
    out, tag = sys.argv[1], sys.argv[2]
    fraction = float(os.environ.get("FRACTION", "0") or 0)
    torch.cuda.init()
    if fraction:
        torch.cuda.set_per_process_memory_fraction(fraction)
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    t0 = time.time()
    err = None
    with tempfile.TemporaryDirectory() as ckpt:
        trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=30,
                            accumulate_grad_batches=2, gradient_clip_val=1.0, val_check_interval=20,
                            limit_val_batches=3, num_sanity_val_steps=2, logger=False, enable_progress_bar=False,
                            enable_model_summary=False, default_root_dir=ckpt,
                            callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=ckpt, save_last=True)])
        model = CausalLM()
        try:
            trainer.fit(model, loader(60, 1), loader(6, 2))
            trainer.validate(model, loader(4, 3), verbose=False)
        except torch.cuda.OutOfMemoryError:
            err = "oom"
    dump_recording(out, "lightning_lm", tag, fraction, err, t0, lightning=L.__version__)


main()
