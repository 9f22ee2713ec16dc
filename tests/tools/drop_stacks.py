#!/usr/bin/env python3
"""A recording with stacks read as if recorded without them: a no-stacks stand-in of real content.

`_record_memory_history(context=None)` (what the corpus's no-stacks recordings use) writes trace entries
without a 'frames' key and every segment's and block's 'frames' as an empty list; nothing else differs.
This drops them from a snapshot recorded with stacks and pickles the result again with Python's own
pickler and the input's protocol: PyTorch pickles its snapshot with that same pickler, so the layout
(memo references, one new str per 'compile_context', batches of 1000) is what the recording made
without stacks would have (the script checks that the pickler reproduces the input byte for byte first).
docs/performance.md times the import of bench/data's 2.4M-entry generation recording dropped so.

usage: drop_stacks.py IN.pickle[.gz] OUT.pickle[.gz]
"""
import gzip
import pickle
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1:]
    with open(src, 'rb') as f:
        raw = f.read()
    if raw[:2] == b'\x1f\x8b':
        raw = gzip.decompress(raw)
    if raw[:1] != b'\x80':
        sys.exit('%s: not a binary pickle (protocol 2 or later)' % src)
    protocol = raw[1]
    snap = pickle.loads(raw)
    if pickle.dumps(snap, protocol=protocol) != raw:
        sys.exit("%s: Python's pickler does not reproduce it byte for byte: not written as PyTorch writes" % src)
    for trace in snap.get('device_traces', []):
        for entry in trace:
            entry.pop('frames', None)
    for seg in snap.get('segments', []):
        seg['frames'] = []
        for block in seg.get('blocks', []):
            block['frames'] = []
    out = pickle.dumps(snap, protocol=protocol)
    if dst.endswith('.gz'):
        out = gzip.compress(out, compresslevel=9)
    with open(dst, 'wb') as f:
        f.write(out)
    print('%s: %d bytes of pickle' % (dst, len(pickle.dumps(snap, protocol=protocol))))


if __name__ == '__main__':
    main()
