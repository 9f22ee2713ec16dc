#!/usr/bin/env python3
"""Device check of fraglab_hook: a small training loop that runs out of memory for real.

Run on a GPU machine from the repository root, after building fraglab:

    PYTHONPATH=python python3 scripts/hook_oom_check.py --fraglab build/fraglab --out out/hook-check

The process caps PyTorch's allocator with torch.cuda.set_per_process_memory_fraction
(default 0.1 of the device), enables the hook (one call), and trains an MLP on batches of
random length that grow every step until an allocation fails. The hook saves the snapshot at
the OOM (rank and time in its name), prints the `fraglab diagnose` command and runs it (the
directory of --fraglab is put on PATH). The script then checks that a snapshot was written and
that the diagnosis ran, and exits 1 otherwise. Its output is what docs/diagnose.md quotes.
"""

import argparse
import os
import random
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fraglab", default="build/fraglab", help="the fraglab binary")
    parser.add_argument("--out", default="out/hook-check", help="where the snapshot goes")
    parser.add_argument("--fraction", type=float, default=0.1, help="set_per_process_memory_fraction")
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    fraglab = os.path.abspath(args.fraglab)
    os.environ["PATH"] = os.path.dirname(fraglab) + os.pathsep + os.environ.get("PATH", "")
    import torch

    import fraglab_hook

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    torch.cuda.set_per_process_memory_fraction(args.fraction)
    total = torch.cuda.get_device_properties(0).total_memory
    capacity = int(args.fraction * total)
    printed = []

    def show(text: str) -> None:
        printed.append(text)
        print(text, flush=True)

    # The capacity is passed explicitly so the check does not depend on the PyTorch version
    # having torch.cuda.get_per_process_memory_fraction.
    hook = fraglab_hook.enable(args.out, capacity=capacity, fraglab=os.path.basename(fraglab), print_fn=show)

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(args.width, args.width), torch.nn.GELU(),
        torch.nn.Linear(args.width, args.width), torch.nn.GELU(),
        torch.nn.Linear(args.width, args.width)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = 2048
    oom_step = None
    for step in range(200):
        # Random sequence lengths on a growing token budget: varied sizes, as real jobs have.
        batch = max(1, tokens // random.randint(64, 512))
        length = tokens // batch
        try:
            x = torch.randn(batch, length, args.width, device="cuda")
            loss = model(x).float().pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        except torch.cuda.OutOfMemoryError:
            oom_step = step
            break
        tokens = int(tokens * 1.25)
    print(f"device {torch.cuda.get_device_name(0)}, capacity {capacity} bytes ({args.fraction} of {total}); "
          f"OOM at step {oom_step} with {tokens} tokens; peak reserved {torch.cuda.max_memory_reserved()} bytes")
    if oom_step is None or not hook.dumps:
        print("FAIL: no OOM or no snapshot", file=sys.stderr)
        return 1
    text = "\n".join(printed)
    if "verdict" not in text:
        print("FAIL: fraglab diagnose did not run or printed no verdict", file=sys.stderr)
        return 1
    print(f"OK: snapshot {hook.dumps[0]} ({os.path.getsize(hook.dumps[0])} bytes), diagnosis printed above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
