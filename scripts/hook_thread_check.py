#!/usr/bin/env python3
"""Device check of fraglab_hook on a real CUDA out-of-memory error: the diagnosis runs through the fraglab
module on a thread of its own after the observer returns, under the capacity PyTorch passes the observer.

    python3 scripts/hook_thread_check.py --out OUT [--fraction 0.02] [--fraglab PATH]

Caps the allocator with torch.cuda.set_per_process_memory_fraction(F), enables the hook, then runs a small
MLP training loop whose batch doubles each step until the allocator raises OutOfMemoryError. Records when the
exception reached the training code and whether the hook's diagnosis thread was still running then (the
OOM did not wait for the diagnosis), waits for the diagnosis, and checks that it replayed under the capacity
PyTorch reported (F x total memory) and that fraglab.diagnose of the written snapshot gives the same document.
Writes OUT/hook_oom_check.txt (the checks as JSON, then what the hook printed). Exit 0 when every check holds.
"""

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--fraction", type=float, default=0.02)
    parser.add_argument("--fraglab", default=None, help="an executable for the hook where the module is missing")
    args = parser.parse_args()
    import torch

    import fraglab_hook

    os.makedirs(args.out, exist_ok=True)
    printed = []

    def say(text):
        printed.append(text)
        print(text, file=sys.stderr, flush=True)

    torch.cuda.set_per_process_memory_fraction(args.fraction, 0)
    total = torch.cuda.get_device_properties(0).total_memory
    module_error = None
    try:
        import fraglab  # noqa: F401
    except ImportError as error:
        module_error = str(error)
    hook = fraglab_hook.enable(args.out, print_fn=say, fraglab=args.fraglab, diagnose_options={"jobs": 8})
    model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 4096)).cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    batch, caught, error = 64, None, None
    while batch < 1 << 24:
        try:
            x = torch.randn(batch, 4096, device="cuda")
            model(x).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            del x
            batch *= 2
        except torch.OutOfMemoryError as e:
            caught = time.monotonic()
            error = str(e).split("\n")[0][:300]
            break
    alive_when_caught = [t.is_alive() for t in hook.threads]
    hook.wait(600)
    done = time.monotonic()
    checks = {
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "python": sys.version.split()[0],
        "fraglab_module": "importable" if module_error is None else f"not importable: {module_error}",
        "fraction": args.fraction, "total_memory": total, "allowed_maximum": int(args.fraction * total),
        "oom_batch": batch, "oom_error": error, "snapshots": hook.dumps,
        "diagnosis_thread_alive_when_the_oom_reached_the_training_code": alive_when_caught,
        "seconds_from_the_oom_reaching_the_code_to_the_diagnosis_done": round(done - caught, 3) if caught else None,
        "diagnoses_in_process": len(hook.diagnoses),
    }
    ok = caught is not None and len(hook.dumps) == 1
    if hook.diagnoses:
        d = hook.diagnoses[0]
        import fraglab

        again = fraglab.diagnose(hook.dumps[0], capacity=d["capacity"], jobs=8)
        checks.update({
            "diagnosis_capacity": d["capacity"],
            "capacity_is_the_observers_allowed_maximum": d["capacity"] == int(args.fraction * total)
            or abs(d["capacity"] - args.fraction * total) < 1 << 20,
            "recorded_ooms_diagnosed": [o["source"] for o in d["ooms"]],
            "verdict": d["verdict"]["text"],
            "same_as_fraglab_diagnose_of_the_file": {k: v for k, v in again.items() if k != "trace"}
            == {k: v for k, v in d.items() if k != "trace"},
        })
        ok = ok and checks["capacity_is_the_observers_allowed_maximum"] and checks[
            "same_as_fraglab_diagnose_of_the_file"]
    else:
        ok = ok and any("verdict" in p or "OOM at event" in p for p in printed)
    checks["ok"] = ok
    with open(os.path.join(args.out, "hook_oom_check.txt"), "w") as f:
        f.write(json.dumps(checks, indent=1) + "\n\n## what the hook printed\n" + "\n".join(printed) + "\n")
    print(json.dumps(checks, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
