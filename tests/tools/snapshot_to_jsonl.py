#!/usr/bin/env python3
"""Converts a PyTorch memory snapshot (.pickle or .pickle.gz) to fraglab's JSONL trace format.

A development aid (Python standard library only: pickle + gzip): it lets a trace be replayed
through fraglab before, or independently of, the C++ snapshot reader, and gives a second
reading of the same file to compare that reader against. It follows the rules of
traces/formats/pytorch/pytorch_snapshot.h:
  - alloc -> alloc (the recorded block address kept as "addr"), free_requested ->
    free_requested, free_completed -> free;
  - segment_alloc/free/map/unmap and oom -> reference events;
  - frees of blocks allocated before recording began are dropped and counted;
  - a run of segment releases that no allocation explains (the next event is not a
    segment_alloc, segment_map or oom of the same malloc call) is preceded by an
    empty_cache event (torch.cuda.empty_cache()).

Usage: snapshot_to_jsonl.py SNAPSHOT OUT.jsonl [--device N]
"""
import argparse
import gzip
import json
import pickle
import sys

RELEASES = ("segment_free", "segment_unmap")
MALLOC_SIDE = ("segment_alloc", "segment_map", "oom")


def load(path):
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        return pickle.load(f)


def settings_text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def flatten_settings(settings, prefix=""):
    """Nested dicts become dotted keys, as the C++ reader does:
    roundup_power2_divisions.1024 -> "4"."""
    out = {}
    for k, v in settings.items():
        if isinstance(v, dict):
            out.update(flatten_settings(v, prefix + str(k) + "."))
        elif not isinstance(v, (list, tuple)):
            out[prefix + str(k)] = settings_text(v)
    return out


class Slots:
    """Dense allocation ids: the lowest id not live (as IdSlots in traces/trace.h)."""

    def __init__(self):
        import heapq
        self.heapq = heapq
        self.free = []
        self.next = 0

    def acquire(self):
        if self.free:
            return self.heapq.heappop(self.free)
        self.next += 1
        return self.next - 1

    def release(self, slot):
        self.heapq.heappush(self.free, slot)


def convert(snapshot, device):
    traces = snapshot.get("device_traces", [])
    entries = traces[device] if device < len(traces) else []
    streams = [0]
    for e in entries:
        if e.get("stream", 0) not in streams:
            streams.append(e.get("stream", 0))
    header = {
        "fraglab_trace": 1,
        "device": device,
        "streams": streams,
        "allocator_settings": flatten_settings(snapshot.get("allocator_settings", {})),
    }
    out = []
    slots = Slots()
    live = {}  # address -> (user id, slot)
    next_user_id = 0
    dropped = 0
    i = 0
    n = len(entries)
    while i < n:
        e = entries[i]
        action = e["action"]
        base = {"t": e.get("time_us", 0)}
        if e.get("stream", 0):
            base["stream"] = e["stream"]
        if action == "alloc":
            uid = next_user_id
            next_user_id += 1
            live[e["addr"]] = uid
            out.append({"op": "alloc", "id": uid, "size": e["size"], "addr": e["addr"], **base})
        elif action in ("free_requested", "free_completed"):
            uid = live.get(e["addr"])
            if uid is None:
                if action == "free_completed":
                    dropped += 1
            else:
                op = "free" if action == "free_completed" else "free_requested"
                out.append({"op": op, "id": uid, **base})
                if action == "free_completed":
                    del live[e["addr"]]
        elif action in RELEASES:
            j = i
            while j < n and entries[j]["action"] in RELEASES:
                j += 1
            if j >= n or entries[j]["action"] not in MALLOC_SIDE:
                out.append({"op": "empty_cache", **base})
            for k in range(i, j):
                r = entries[k]
                ev = {"op": r["action"], "size": r["size"], "addr": r["addr"], "t": r.get("time_us", 0)}
                if r.get("stream", 0):
                    ev["stream"] = r["stream"]
                out.append(ev)
            i = j
            continue
        elif action in ("segment_alloc", "segment_map"):
            out.append({"op": action, "size": e["size"], "addr": e["addr"], **base})
        elif action == "oom":
            out.append({"op": "oom", "size": e["size"], **base})
        i += 1
    if dropped:
        header["dropped_unknown_frees"] = dropped
    return header, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot")
    ap.add_argument("out")
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args()
    header, events = convert(load(args.snapshot), args.device)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(header) + "\n")
        for ev in events:
            f.write(json.dumps(ev) + "\n")
    import os
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
