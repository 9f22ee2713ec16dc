"""How well the address models predict the segment addresses of real PyTorch runs: every bundled
recording and the recordings in recordings/, their cudaMalloc/cudaFree sequence (which the pytorch
model reproduces call for call, `fraglab fidelity --no-address-hints` = exact) placed by the CUDA model
(driver_model.py) and by the bump model, against the addresses the run recorded.
    python3 tools/cuda_addresses/accuracy.py
Columns: exact from the first segment on; exact up to one shift (the best common offset: memory the
process took outside the allocator moves everything after it); same-size pairs in the recorded
address order (what PyTorch's pools compare)."""
import glob, gzip, os, pickle
from collections import Counter

from driver_model import run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def segment_calls(path):
    snap = pickle.load(gzip.open(path))
    ops, index, addrs, sizes = [], {}, [], []
    for e in snap["device_traces"][0]:
        if e["action"] == "segment_alloc":
            index[e["addr"]] = len(addrs)
            ops.append(f"a {e['size']}")
            addrs.append(e["addr"])
            sizes.append(e["size"])
        elif e["action"] == "segment_free":
            ops.append(f"f {index.pop(e['addr'])}")
    return ops, addrs, sizes


def reserved_ranges(path):
    """The base of each expandable segment's range (its first segment_map), in order."""
    snap = pickle.load(gzip.open(path))
    bases = []
    for e in snap["device_traces"][0]:
        if e["action"] == "segment_map" and not any(b <= e["addr"] < b + 95644811264 for b in bases):
            bases.append(e["addr"])
    return bases


def bump(sizes):
    out, at = [], 1 << 32
    for s in sizes:
        out.append(at)
        at = (at + s + (2 << 20) - 1) // (2 << 20) * (2 << 20) + (2 << 20)
    return out


def order_agreement(pred, real, sizes):
    same = total = 0
    for i in range(len(real)):
        for j in range(i + 1, len(real)):
            if sizes[i] == sizes[j]:
                total += 1
                same += (pred[i] < pred[j]) == (real[i] < real[j])
    return same, total


def main():
    paths = sorted(glob.glob(os.path.join(ROOT, "traces/corpus/*.pickle.gz"))) + \
        sorted(glob.glob(os.path.join(HERE, "recordings/*.pickle.gz"))) + \
        sorted(glob.glob(os.path.join(HERE, "recordings/repeat/*.pickle.gz")))
    print("| recording | segments | cuda: exact from the first | cuda: exact up to one shift | "
          "same-size order, cuda | same-size order, bump |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for path in paths:
        ops, real, sizes = segment_calls(path)
        name = os.path.relpath(path, ROOT).replace(".pickle.gz", "")
        if path.endswith(".stacks.pickle.gz"):
            continue
        if not real:  # expandable segments: the reserved ranges, at fixed addresses
            bases = reserved_ranges(path)
            pred = [a for _, a in run(["r 95651102720"] * len(bases))]  # ranges of 1.125 x 80 GB; PyTorch's
            same = sum(1 for p, r in zip(pred, bases) if p == r)       # small-pool range is 6 MiB shorter
            print(f"| {name} | {len(bases)} ranges | {same}/{len(bases)} | {same}/{len(bases)} | — | — |")
            continue
        pred = [a for _, a in run(ops)]
        first = sum(1 for p, r in zip(pred, real) if r - p == real[0] - pred[0])
        shift = Counter(r - p for p, r in zip(pred, real)).most_common(1)[0][1]
        oc, ot = order_agreement(pred, real, sizes)
        ob, _ = order_agreement(bump(sizes), real, sizes)
        n = len(real)
        pct = lambda a, b: f"{a}/{b} ({100 * a / b:.0f}%)" if b else "—"
        print(f"| {name} | {n} | {pct(first, n)} | {pct(shift, n)} | {pct(oc, ot)} | {pct(ob, ot)} |")


if __name__ == "__main__":
    main()
