#!/usr/bin/env python3
"""Device check of fraglab_hook on a real program: `probe` (the largest batch that fits, from probes taken in
the training process) and `enable` (the OOM hook: snapshot + `fraglab diagnose`).

Run on a GPU machine from the repository root:

    PYTHONPATH=python python3 scripts/hook_probe_check.py --fraglab build/fraglab --out out/hook-probe \\
        [--libdir DIR] [--fraction 0.0968] [--oom-batch 16]

The process caps PyTorch's allocator with torch.cuda.set_per_process_memory_fraction(F) (default 0.0968, the
fraction under which tests/data/fit/ recorded causal_lm's real largest batch: 12 under the defaults), then

  (a) builds causal_lm of scripts/record_batch_probes.py (GPT-2-like, 6 layers, sequence 1024, bf16 autocast,
      AdamW) and calls fraglab_hook.probe(step, batches=(2, 4), fraglab=...): a warm-up step, probes of 3 steps
      at batches 2 and 4 in this process, `fraglab fit` on them under the fraction's capacity; saves the JSON
      it returns as OUT/probe_fit.json;
  (b) frees that model, enables the OOM hook (fraglab_hook.enable(OUT/oom, fraglab=...)), builds the model
      again and trains at --oom-batch, which runs out under F; the OutOfMemoryError is caught; the hook saves
      the snapshot and runs `fraglab diagnose` on it.

Everything the hook printed (print_fn appends to a list and prints) goes to OUT/hook_probe_check.txt with a
header (GPU, torch version, date) and the fit JSON. --libdir is put on LD_LIBRARY_PATH of the fraglab
subprocesses only (a fraglab built elsewhere, carried with its shared libraries), not of this process.
Exit 0 when probe returned an answer and the hook wrote a snapshot and printed a diagnosis, else 1.
"""

import argparse
import gc
import json
import os
import sys
import time
import traceback


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fraglab", default="build/fraglab", help="the fraglab binary")
    parser.add_argument("--libdir", default=None, help="shared libraries of fraglab (LD_LIBRARY_PATH of its runs)")
    parser.add_argument("--out", default="out/hook-probe", help="where the probes, snapshot and report go")
    parser.add_argument("--fraction", type=float, default=0.0968, help="set_per_process_memory_fraction")
    parser.add_argument("--batches", default="2,4", help="probe batches")
    parser.add_argument("--oom-batch", type=int, default=16, help="a batch that runs out under the fraction")
    args = parser.parse_args()

    fraglab = os.path.abspath(args.fraglab)
    os.environ["PATH"] = os.path.dirname(fraglab) + os.pathsep + os.environ.get("PATH", "")
    if args.libdir:  # read by the dynamic loader of the processes started from here, not of this one
        lib = os.path.abspath(args.libdir)
        os.environ["LD_LIBRARY_PATH"] = lib + (os.pathsep + os.environ["LD_LIBRARY_PATH"]
                                               if os.environ.get("LD_LIBRARY_PATH") else "")
    os.makedirs(args.out, exist_ok=True)

    import torch

    import fraglab_hook
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import record_batch_probes as rbp

    printed = []

    def show(text: str) -> None:
        printed.append(text)
        print(text, flush=True)

    torch.cuda.init()
    torch.cuda.set_per_process_memory_fraction(args.fraction)
    total = torch.cuda.get_device_properties(0).total_memory
    capacity = int(args.fraction * total)
    hook_capacity = fraglab_hook._fraction_capacity(0)  # what the hook reads from the fraction by itself
    import transformers

    header = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "total_memory": total,
        "fraction": args.fraction,
        "capacity_bytes": capacity,
        "capacity_the_hook_read_from_the_fraction": hook_capacity,
        "fraglab": fraglab,
        "program": "causal_lm of scripts/record_batch_probes.py (GPT-2-like, 6 layers, seq 1024, bf16, AdamW)",
        "probe_batches": args.batches,
        "oom_batch": args.oom_batch,
    }
    # When this torch lacks get_per_process_memory_fraction the hook would use the whole device: say so and pass it.
    explicit = None if hook_capacity == capacity else capacity

    # (a) probe
    answer, probe_error, t0 = None, None, time.time()
    batches = tuple(int(b) for b in args.batches.split(","))
    m, opt, step = rbp.causal_lm_model()
    try:
        answer = fraglab_hook.probe(step, batches=batches, out_dir=os.path.join(args.out, "probes"),
                                    capacity=explicit, fraglab=fraglab, print_fn=show)
        json.dump(answer, open(os.path.join(args.out, "probe_fit.json"), "w"), indent=1)
    except Exception:
        probe_error = traceback.format_exc()
        show("hook_probe_check: probe failed:\n" + probe_error)
    probe_s = time.time() - t0
    probe_peak = torch.cuda.max_memory_reserved()
    del m, opt, step
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()

    # (b) the OOM hook
    t0 = time.time()
    hook = fraglab_hook.enable(os.path.join(args.out, "oom"), fraglab=fraglab, capacity=explicit, print_fn=show)
    hook.diagnose_timeout = 300.0
    oom_step, oom_error = None, None
    m, opt, step = rbp.causal_lm_model()
    try:
        for i in range(3):
            step(args.oom_batch)
            oom_step = None
            torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as error:
        oom_step = i
        oom_error = str(error).split("\n")[0][:400]
    fraglab_hook.disable()
    hook_s = time.time() - t0
    del m, opt, step

    diagnosis = "\n".join(printed)
    checks = {
        "probe_returned_an_answer": bool(answer and answer.get("answers")),
        "oom_caught_at_step": oom_step,
        "oom_error": oom_error,
        "snapshot_written": list(hook.dumps),
        "diagnose_ran": "verdict" in diagnosis.lower(),
        "live_by_the_line_of_your_code": "live by the line of your code" in diagnosis,
        "probe_seconds": round(probe_s, 1),
        "probe_peak_reserved": probe_peak,
        "oom_part_seconds": round(hook_s, 1),
    }
    if answer:
        checks["probe_answers"] = [{k: a.get(k) for k in ("label", "conf", "largest_batch",
                                                            "peak_reserved_at_largest", "first_failing_batch")}
                                   for a in answer.get("answers", [])]
        checks["probe_confidence"] = answer.get("confidence")

    with open(os.path.join(args.out, "hook_probe_check.txt"), "w") as out:
        out.write("# fraglab_hook on a real GPU: probe() and the OOM hook (scripts/hook_probe_check.py)\n")
        for k, v in header.items():
            out.write(f"# {k}: {v}\n")
        out.write("\n## checks\n" + json.dumps(checks, indent=1) + "\n")
        out.write("\n## what the hook printed (print_fn), in order\n")
        for text in printed:
            out.write(text.rstrip("\n") + "\n")
        out.write("\n## the JSON fraglab_hook.probe returned (fraglab fit --json)\n")
        out.write((json.dumps(answer, indent=1) if answer is not None else "none: " + str(probe_error)) + "\n")
    print(json.dumps(checks, indent=1), flush=True)
    ok = checks["probe_returned_an_answer"] and hook.dumps and checks["diagnose_ran"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
