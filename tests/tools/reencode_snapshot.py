#!/usr/bin/env python3
"""Re-encode a PyTorch memory snapshot the ways users store them, for fraglab's format tests.

    reencode_snapshot.py SNAPSHOT.pickle[.gz] OUTDIR [--json-only]

Writes OUTDIR/NAME.protoN.pickle.gz for pickle protocols 1-5 (Python's pickler; protocol 4
adds FRAME/MEMOIZE/SHORT_BINUNICODE, 5 is what Python 3.14 writes by default) and
OUTDIR/NAME.json.gz (json.dump of the same dict, as MemoryViz reads it). The snapshot's
content is unchanged: fraglab must load every variant to the identical trace.
"""
import gzip
import json
import os
import pickle
import sys


def main():
    src, outdir = sys.argv[1], sys.argv[2]
    json_only = "--json-only" in sys.argv[3:]
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rb") as f:
        snapshot = pickle.load(f)
    name = os.path.basename(src)
    for ext in (".pickle.gz", ".pickle", ".pkl.gz", ".pkl"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    os.makedirs(outdir, exist_ok=True)
    if not json_only:
        for protocol in range(1, 6):
            # mtime=0: the same input gives the same bytes.
            with gzip.GzipFile(os.path.join(outdir, f"{name}.proto{protocol}.pickle.gz"), "wb", mtime=0) as f:
                pickle.dump(snapshot, f, protocol=protocol)
    with gzip.GzipFile(os.path.join(outdir, f"{name}.json.gz"), "wb", mtime=0) as f:
        f.write(json.dumps(snapshot).encode())


if __name__ == "__main__":
    main()
