#!/usr/bin/env python3
"""Scales a real PyTorch memory snapshot up: a stand-in for a recording too large to keep.

The device_traces[device] history is repeated K times, each copy shifted in time (after the
previous copy's last entry) and in address (by the span of the addresses the snapshot uses,
rounded up to 1 GiB), with the copy's segments added to 'segments' the same way. What a pickle
of the copies holds is what PyTorch's own conversion (torch/csrc/cuda/memory_snapshot.cpp)
writes for a longer run: every entry a new dict, every alloc's frames a new list of the shared
frame dicts (a free names its alloc's list through the memo, as in the recording), every
'compile_context' a new str object. So the opcode and byte mix per entry is the real file's;
`--mix` prints the opcode counts and bytes per entry of the input and of the output to check.

The memory-snapshot layout is the one PyTorch writes; the pickle protocol is the input's.

usage: scale_snapshot.py IN.pickle[.gz] OUT.pickle[.gz] (--copies K | --bytes N) [--device D] [--mix]
"""
import argparse
import collections
import gzip
import pickle
import pickletools
import sys


def load(path):
    with open(path, 'rb') as f:
        raw = f.read()
    if raw[:2] == b'\x1f\x8b':
        raw = gzip.decompress(raw)
    return raw


def fresh_str(s):
    # A new str object with the same text ('' and one-character strings are shared by CPython anyway).
    return s.encode().decode() if isinstance(s, str) else s


def copy_history(entries, k, dt, da, alloc_frames):
    out = []
    for e in entries:
        c = dict(e)
        if k:
            if isinstance(c.get('time_us'), int):
                c['time_us'] += k * dt
            if 'addr' in c and c.get('action') != 'oom':
                c['addr'] += k * da
        if 'compile_context' in c:
            c['compile_context'] = fresh_str(c['compile_context'])
        f = e.get('frames')
        if isinstance(f, list):
            # One list per alloc, shared by the entries that shared it in the recording.
            key = id(f)
            if key not in alloc_frames:
                alloc_frames[key] = list(f)
            c['frames'] = alloc_frames[key]
        out.append(c)
    return out


def shifted_segments(segments, device, k, da):
    out = []
    for s in segments:
        if s.get('device', 0) != device:
            continue
        c = dict(s)
        c['address'] += k * da
        blocks = []
        for b in s.get('blocks', []):
            b = dict(b)
            if 'address' in b:
                b['address'] += k * da
            blocks.append(b)
        c['blocks'] = blocks
        out.append(c)
    return out


def mix(raw):
    ops = collections.Counter()
    for op, _, _ in pickletools.genops(raw):
        ops[op.name] += 1
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('input')
    ap.add_argument('output')
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument('--copies', type=int, help='how many copies of the history (1 = the input)')
    g.add_argument('--bytes', type=float, help='uncompressed size to reach at least (e.g. 1.1e9)')
    ap.add_argument('--device', type=int, default=0)
    ap.add_argument('--mix', action='store_true', help='print the opcode mix of input and output')
    a = ap.parse_args()

    raw = load(a.input)
    proto = raw[1] if raw[:1] == b'\x80' else 2
    snap = pickle.loads(raw)
    entries = snap['device_traces'][a.device]
    if not entries:
        sys.exit('the snapshot has no history for device %d' % a.device)
    copies = a.copies or max(1, -(-int(a.bytes) // len(raw)))
    times = [e['time_us'] for e in entries if isinstance(e.get('time_us'), int)]
    dt = (max(times) - min(times) + 1) if times else 0
    addrs = [e['addr'] for e in entries if isinstance(e.get('addr'), int)]
    addrs += [s['address'] + s['total_size'] for s in snap.get('segments', [])]
    da = -(-(max(addrs) - min(addrs) + 1) // (1 << 30)) * (1 << 30)

    history, segments = [], []
    for k in range(copies):
        alloc_frames = {}
        history += copy_history(entries, k, dt, da, alloc_frames)
        if k:
            segments += shifted_segments(snap.get('segments', []), a.device, k, da)
    out = dict(snap)
    out['segments'] = list(snap.get('segments', [])) + segments
    traces = list(snap['device_traces'])
    traces[a.device] = history
    out['device_traces'] = traces
    data = pickle.dumps(out, protocol=proto)
    opener = gzip.open if a.output.endswith('.gz') else open
    with opener(a.output, 'wb') as f:
        f.write(data)
    print('%s: %d entries (%d copies), %d bytes of pickle (%.1f per entry; input %.1f)'
          % (a.output, len(history), copies, len(data), len(data) / len(history), len(raw) / len(entries)))
    if a.mix:
        mi, mo = mix(raw), mix(data)
        print('%-20s %14s %14s' % ('opcode per entry', 'input', 'output'))
        for op in sorted(set(mi) | set(mo), key=lambda o: -mo.get(o, 0)):
            print('%-20s %14.3f %14.3f' % (op, mi.get(op, 0) / len(entries), mo.get(op, 0) / len(history)))


if __name__ == '__main__':
    main()
