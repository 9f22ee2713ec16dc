#!/usr/bin/env python3
"""Turns the output of scripts/bench_ab.sh (alternated runs of an old and a new fraglab_bench) into the
Markdown table of docs/performance.md: per policy and trace, the median CPU ms of each binary, their
ratio, and the new binary's events/s.

    scripts/bench_ab.sh OLD NEW FILTER RUNS > ab.txt
    python3 bench/ab_table.py ab.txt [--old-name c8479ab] [--new-name HEAD]

Events/s need the number of events each trace replays: bench_ab.sh prints it (events=N) since it reads
the benchmark's items_per_second; an older output without it gets them from --events TRACE=N.
CPU time is the figure used: on a shared machine it moves less than wall time, and the benchmark is
single-threaded, so the two agree when the machine is quiet (bench_ab.sh prints both)."""
import argparse
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^(old|new) replay/([^/]+)/([^/]+)/real_time real_ms=(\S+) cpu_ms=(\S+)(?: events=(\S+))?")


def trace_name(file_name):
    return re.sub(r"\.(pickle\.gz|pickle|fltrace)$", "", file_name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ab_output")
    ap.add_argument("--old-name", default="old")
    ap.add_argument("--new-name", default="new")
    ap.add_argument("--events", action="append", default=[], metavar="TRACE=N")
    args = ap.parse_args()

    cpu = defaultdict(list)  # (side, policy, trace) -> CPU ms of each run
    events = {}
    for name_count in args.events:
        name, _, count = name_count.partition("=")
        if not count.isdigit():
            print(f"--events {name_count}: expected TRACE=N", file=sys.stderr)
            sys.exit(2)
        events[name] = int(count)
    try:
        lines = open(args.ab_output).read().splitlines()
    except OSError as e:
        print(f"{args.ab_output}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        side, policy, trace, _, cpu_ms, ev = m.groups()
        trace = trace_name(trace)
        cpu[(side, policy, trace)].append(float(cpu_ms))
        if ev:
            events[trace] = round(float(ev))
    if not cpu:
        print(f"{args.ab_output}: no bench_ab.sh lines (\"old|new replay/POLICY/TRACE/real_time ...\")", file=sys.stderr)
        sys.exit(2)

    policies = list(dict.fromkeys(p for (_, p, _) in cpu))
    traces = list(dict.fromkeys(t for (_, _, t) in cpu))
    head = ["policy"]
    for t in traces:
        head += [f"{t} {args.old_name} ms", f"{args.new_name} ms", "ratio", "M events/s"]
    print("| " + " | ".join(head) + " |")
    print("| --- |" + " ---: |" * (len(head) - 1))
    for p in policies:
        row = [p]
        for t in traces:
            old, new = cpu.get(("old", p, t)), cpu.get(("new", p, t))
            if not old or not new:
                row += ["-"] * 4
                continue
            o, w = statistics.median(old), statistics.median(new)
            rate = f"{events[t] / w / 1e3:.1f}" if t in events else "?"
            row += [fmt_ms(o), fmt_ms(w), f"{o / w:.2f}x", rate]
        print("| " + " | ".join(row) + " |")
    runs = {len(v) for v in cpu.values()}
    print(f"\nMedians of {'/'.join(map(str, sorted(runs)))} alternated runs each, CPU time of one replay.")


def fmt_ms(ms):
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.2f}"


if __name__ == "__main__":
    main()
