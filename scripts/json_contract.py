#!/usr/bin/env python3
"""Rewrites a `replay --json` document or a compare results.json of a fraglab from before the JSON
contract (docs/json.md, schema_version 1) into the contract's shape, and prints either canonically (keys
sorted, replay_seconds left out), so that scripts/check_same_decisions.sh compares the decisions of a
binary from before the contract with one from after it.
Usage: json_contract.py FILE   (prints the canonical document)"""

import json
import sys

CALLS = {"segment_alloc": "segment_allocs", "segment_free": "segment_frees", "map": "maps", "unmap": "unmaps",
         "reserve": "reserves", "release": "releases"}


def calls(c):
    return {CALLS.get(k, k): v for k, v in c.items()}


def replay_result(r):
    r = dict(r)
    for peak in ("peak_requested", "peak_allocated", "peak_reserved"):
        if isinstance(r.get(peak), dict):
            r[peak + "_event"] = r[peak]["event_index"]
            r[peak] = r[peak]["bytes"]
    if "device_calls" in r:
        r["device_calls"] = calls(r["device_calls"])
    r.pop("replay_seconds", None)
    return r


def contract(doc):
    if isinstance(doc, dict) and "fraglab_compare" in doc:  # compare results.json
        doc = dict(doc, schema_version=1, command="compare", fraglab_compare=2)
        rows = []
        for row in doc["rows"]:
            row = dict(row)
            if "fragmentation_at_peak" in row:
                row["external_fragmentation_at_peak"] = row.pop("fragmentation_at_peak")
            row["device_calls"] = calls(row["device_calls"])
            rows.append(row)
        doc["rows"] = rows
        return doc
    if isinstance(doc, dict) and doc.get("command") == "replay":
        return dict(doc, results=[replay_result(r) for r in doc["results"]])
    results = doc if isinstance(doc, list) else [doc]  # before the contract: an object for one policy
    return {"schema_version": 1, "command": "replay", "trace": results[0]["trace"],
            "live_bytes_bound": results[0]["live_bytes_bound"], "results": [replay_result(r) for r in results]}


with open(sys.argv[1]) as f:
    print(json.dumps(contract(json.load(f)), indent=1, sort_keys=True))
