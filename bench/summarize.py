#!/usr/bin/env python3
"""Turns Google Benchmark JSON (with repetitions) into the Markdown tables of docs/performance.md:
the median of each benchmark, as events/s (items) and MB/s (bytes) where reported.

Then checks the replay target of docs/performance.md, every policy >= 5M events/s on
bert_varlen_train.default, and prints one row per policy. With --check it exits 1 when a
policy misses it (or none was measured). The verdict is on real time, as the target is;
events/s by CPU time are shown beside it, the figure to read on a loaded machine."""
import json
import sys

TARGET_TRACE = "bert_varlen_train.default"
TARGET_EVENTS_PER_S = 5e6


def fmt_rate(v, unit):
    if v is None:
        return ""
    if v >= 1e9:
        return f"{v / 1e9:.2f} G{unit}"
    if v >= 1e6:
        return f"{v / 1e6:.1f} M{unit}"
    if v >= 1e3:
        return f"{v / 1e3:.1f} k{unit}"
    return f"{v:.0f} {unit}"


def check_target(rows):
    """Prints the every-policy target table; returns the policies that miss it."""
    found = []
    for b in rows:
        parts = b["run_name"].split("/")
        if len(parts) < 3 or parts[0] != "replay" or not parts[2].startswith(TARGET_TRACE + "."):
            continue
        real = b.get("items_per_second")
        if real is None:
            continue
        cpu = real * b["real_time"] / b["cpu_time"] if b.get("cpu_time") else None
        found.append((parts[1], real, cpu))
    print(f"\n### Target: every policy >= {TARGET_EVENTS_PER_S / 1e6:.0f}M events/s on {TARGET_TRACE}\n")
    print("| policy | M ev/s (real time) | M ev/s (CPU time) | target |")
    print("|---|---:|---:|---|")
    missed = []
    for policy, real, cpu in found:
        ok = real >= TARGET_EVENTS_PER_S
        if not ok:
            missed.append(policy)
        cpu_text = "" if cpu is None else f"{cpu / 1e6:.1f}"
        print(f"| {policy} | {real / 1e6:.1f} | {cpu_text} | {'met' if ok else '**missed**'} |")
    if not found:
        print(f"(no replay/*/{TARGET_TRACE} benchmark in this run)")
        return ["(none measured)"]
    print(f"\n{len(found) - len(missed)} of {len(found)} policies meet it" +
          (f"; missed: {', '.join(missed)}" if missed else ""))
    return missed


def main(path, check=False):
    data = json.load(open(path))
    ctx = data["context"]
    print(f"machine: {ctx.get('host_name', '?')}, {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz, "
          f"date {ctx.get('date')}")
    rows = [b for b in data["benchmarks"] if b.get("aggregate_name") == "median"]
    groups = {}
    for b in rows:
        name = b["run_name"]
        group = name.split("/")[0]
        groups.setdefault(group, []).append(b)
    for group, items in groups.items():
        print(f"\n### {group}\n")
        print("| benchmark | median time | events/s | MB/s | extra |")
        print("|---|---|---|---|---|")
        for b in items:
            extra = ", ".join(f"{k}={b[k]:.3g}" for k in ("peak_reserved_GB", "file_MB") if k in b)
            mbs = b.get("bytes_per_second")
            print(f"| {b['run_name'].split('/', 1)[1]} | {b['real_time']:.2f} {b['time_unit']} | "
                  f"{fmt_rate(b.get('items_per_second'), 'ev/s')} | {'' if mbs is None else f'{mbs / 1e6:.1f}'} | {extra} |")
    missed = check_target(rows)
    if check and missed:
        sys.exit(1)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--check"]
    if len(args) != 1:
        sys.exit("usage: summarize.py [--check] BENCH.json")
    main(args[0], check="--check" in sys.argv[1:])
