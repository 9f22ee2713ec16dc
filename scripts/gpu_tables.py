#!/usr/bin/env python3
"""Markdown tables for docs/gpu.md from the JSON that scripts/gpu-replay.sh writes."""
import glob
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "gpu-results"


def us(lat, key):
    return f"{lat[key] / 1e3:.1f}" if lat.get("count") else "-"


def lat_cells(lat):
    return " / ".join(us(lat, k) for k in ("mean_ns", "p50_ns", "p99_ns", "max_ns"))


rows = []
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(path)[:-5]
    try:
        with open(path) as f:
            j = json.load(f)
    except (ValueError, OSError):
        rows.append((name, None))
        continue
    if "results" in j:  # replay --json since schema_version 1 (docs/json.md): one result per policy
        j = j["results"][0]
    rows.append((name, j))

print("| run | malloc µs mean / p50 / p99 / max | free µs mean / p50 / p99 / max | reserved peak: driver | policy's count | simulated | c10 / pool | free before | free after |")
print("|---|---|---|---|---|---|---|---|---|")
for name, j in rows:
    if j is None:
        print(f"| {name} | (no result) | | | | | | | |")
        continue
    if j.get("tool") == "torch_reference":
        print(f"| {name} | {lat_cells(j['latency']['malloc'])} | {lat_cells(j['latency']['free'])} | "
              f"{j['reserved_peak']['driver']} | - | - | {j['reserved_peak']['c10']} | "
              f"{j['free_memory']['before']} | {j['free_memory']['after']} |")
        continue
    rp = j["reserved_peak"]
    pool = j.get("pool", {}).get("reserved_mem_high", "-")
    sim = rp["simulated"] if rp["simulated"] is not None else "-"
    print(f"| {name} | {lat_cells(j['latency']['malloc'])} | {lat_cells(j['latency']['free'])} | {rp['driver']} | "
          f"{rp['counted']} | {sim} | {pool} | {j['free_memory']['before']} | {j['free_memory']['after']} |")
