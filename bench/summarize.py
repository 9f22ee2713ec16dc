#!/usr/bin/env python3
"""Turns Google Benchmark JSON (with repetitions) into the Markdown tables of docs/performance.md:
the median of each benchmark, as events/s (items) and MB/s (bytes) where reported."""
import json
import sys


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


def main(path):
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


if __name__ == "__main__":
    main(sys.argv[1])
