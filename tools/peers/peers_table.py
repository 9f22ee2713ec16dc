#!/usr/bin/env python3
"""Writes docs/peers.md to stdout: each peer allocator's real numbers (DIR/real/TRACE@CFG.json,
from tools/peers/run.sh device) beside fraglab's model of it (DIR/model/TRACE@CFG.json, from
`fraglab replay --json`), per trace, then tools/peers/notes.md (what explains each difference).

  peers_table.py DIR              (DIR: .device-carry/peers)
  peers_table.py --collect DIR    DIR/real into docs/peers-results.jsonl

Without DIR/real, the real numbers come from docs/peers-results.jsonl."""
import json
import os
import sys

KEPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "peers-results.jsonl")

# config -> (peer, how it is run, model policy string); the order of the document.
CONFIGS = [
    ("rmm_pool", "RMM pool_memory_resource(cuda, 0)", "rmm_pool"),
    ("rmm_binning", "RMM binning_memory_resource(pool, 18, 22)", "rmm_binning"),
    ("rmm_arena", "RMM arena_memory_resource(cuda) (default size)", "rmm_arena"),
    ("cuda_async", "cudaMallocAsync, fresh pool, release threshold 0, no synchronisation", "cuda_async:sync_after_free=false"),
    ("cuda_async.sync", "the same, stream synchronised after each free", "cuda_async"),
    ("cuda_async.max", "cudaMallocAsync, release threshold max", "cuda_async:release_threshold=281474976710656"),
    ("cupy", "CuPy MemoryPool", "cupy"),
    ("bfc", "XLA BFC through JAX (no preallocation)", "bfc"),
]


def load(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        if not text:
            return None
        try:
            return json.loads(text)  # fraglab's pretty-printed object
        except ValueError:
            return json.loads(text.splitlines()[-1])  # a runner's line after any chatter
    except (OSError, ValueError):
        return None


def model_numbers(m):
    # replay --json before its schema_version 1 (the stored results) and since (docs/json.md)
    if "results" in m:
        m = m["results"][0]
    calls = m["device_calls"]

    def peak(v):
        return v["bytes"] if isinstance(v, dict) else v

    return dict(reserved=peak(m["peak_reserved"]), in_use=peak(m["peak_allocated"]),
                calls=calls.get("segment_allocs", calls.get("segment_alloc")) + calls.get("maps", calls.get("map")),
                ooms=len(m.get("ooms", [])))


def real_numbers(r):
    calls = r.get("device_allocs")
    if calls is None:
        calls = r.get("reserved_growths")
    return dict(reserved=r.get("reserved_peak"), in_use=r.get("in_use_peak", r.get("used_peak")),
                calls=calls, ooms=r.get("ooms", 0))


def cell(real, model):
    if real is None:
        return "-"
    if model is None or real == model:
        return f"{real:,}" if model is None else f"**{real:,}** ="
    return f"{real:,} ({(model - real) / real:+.2%})" if real else f"{real:,}"


def real_results(d):
    """(trace, config) -> the runner's JSON: from DIR/real, else the results kept in the
    repository (docs/peers-results.jsonl, written by collect())."""
    out = {}
    real = os.path.join(d, "real")
    if os.path.isdir(real):
        for f in os.listdir(real):
            if f.endswith(".json") and "@" in f:
                r = load(os.path.join(real, f))
                if r is not None:
                    out[tuple(f[:-5].split("@", 1))] = r
        return out
    with open(KEPT) as f:
        for line in f:
            row = json.loads(line)
            out[(row["trace"], row["config"])] = row["result"]
    return out


def collect(d):
    """Writes DIR/real's results to docs/peers-results.jsonl, one run a line."""
    rows = real_results(d)
    with open(KEPT + ".tmp", "w") as f:
        for (trace, cfg), r in sorted(rows.items()):
            f.write(json.dumps(dict(trace=trace, config=cfg, result=r), sort_keys=True) + "\n")
    os.replace(KEPT + ".tmp", KEPT)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        return 0
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    d = sys.argv[1]
    real = real_results(d)
    traces = sorted(f[:-4] for f in os.listdir(os.path.join(d, "ops")) if f.endswith(".ops"))
    gpu = sorted({r.get("gpu", "?") for r in real.values()}) or ["?"]
    out = [open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "header.md")).read().rstrip(), "",
           f"GPU: {', '.join(gpu)}.", ""]
    for cfg, peer, policy in CONFIGS:
        rows = []
        version = None
        for t in traces:
            r = real.get((t, cfg))
            m = load(os.path.join(d, "model", f"{t}@{cfg}.json"))
            if r is None and m is None:
                continue
            version = version or (r or {}).get("peer")
            rn = real_numbers(r) if r else dict(reserved=None, in_use=None, calls=None, ooms=None)
            mn = model_numbers(m) if m else dict(reserved=None, in_use=None, calls=None, ooms=None)
            rows.append(f"| {t} | {cell(rn['reserved'], None)} | {cell(mn['reserved'], None)} | "
                        f"{'equal' if rn['reserved'] == mn['reserved'] else cell(rn['reserved'], mn['reserved'])} | "
                        f"{cell(rn['in_use'], mn['in_use'])} | {cell(rn['calls'], mn['calls'])} | "
                        f"{rn['ooms']} / {mn['ooms']} |")
        if not rows:
            continue
        out += [f"## {cfg}: {peer}", "", f"Peer: {version or '?'}; model: `{policy}`.", "",
                "| trace | peak reserved, real | model | model vs real | peak in use, real (model vs real) "
                "| device calls, real (model vs real) | OOMs real / model |",
                "|---|---|---|---|---|---|---|", *rows, ""]
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "notes.md")
    if os.path.exists(notes):
        out.append(open(notes).read().rstrip())
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
