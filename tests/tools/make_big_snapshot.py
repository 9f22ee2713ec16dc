#!/usr/bin/env python3
"""Writes a large PyTorch memory snapshot for measuring snapshot import speed.

The layout is exactly what torch.cuda.memory._dump_snapshot() pickles (a dict with
'segments', 'device_traces', 'allocator_settings', 'external_annotations'; trace
entries with action, addr, size, stream, time_us, compile_context, user_metadata,
frames), written with pickle protocol 4 like PyTorch's recordings in traces/corpus.
Each entry gets its own 'N/A' string object and its own empty frames list, as
PyTorch's C++ -> Python conversion produces them, so the byte mix per entry matches
the real corpus (~67 bytes per entry).

The workload is a deterministic (seeded) caching-allocator-like history: requests
of log-uniform sizes served from 2 MiB / 20 MiB-or-larger segments, each block freed
with free_requested then free_completed, with a working set that swings like training
steps. Default: 2.4M entries, about 160 MB uncompressed.

usage: make_big_snapshot.py OUT.pickle [--entries N] [--seed S] [--stacks]
"""
import argparse
import pickle
import random


def build(entries, seed, stacks):
    rng = random.Random(seed)
    trace = []
    live = []  # [addr, size]
    cached = {}  # rounded size -> addresses of freed blocks
    segments = []  # [addr, size]
    next_seg = 0x7F0000000000
    seg_free = 0  # bytes left in the newest segment
    seg_cursor = 0
    t = 1_700_000_000_000_000
    stream = 0
    frame_pool = [
        [{'name': f'fn{i}_{j}', 'filename': f'/src/model_{i % 7}.py', 'line': 10 + j} for j in range(6)]
        for i in range(64)
    ]

    def frames():
        return rng.choice(frame_pool) if stacks else []

    def entry(action, addr, size):
        nonlocal t
        t += rng.randint(1, 40)
        trace.append({'action': action, 'addr': addr, 'size': size, 'stream': stream, 'time_us': t,
                      'compile_context': ''.join(['N/', 'A']), 'user_metadata': '', 'frames': frames()})

    step = 0
    while len(trace) < entries:
        step += 1
        target = 4000 + 3000 * ((step // 500) % 2)  # live blocks swing like fwd/bwd
        if live and (len(live) > target or rng.random() < 0.45):
            addr, size = live.pop(rng.randrange(len(live)))
            entry('free_requested', addr, size)
            entry('free_completed', addr, size)
            cached.setdefault(max(512, (size + 511) // 512 * 512), []).append(addr)
            continue
        size = int(2 ** rng.uniform(2, 22)) // 4 * 4  # 4 B .. 4 MiB, log-uniform
        rounded = max(512, (size + 511) // 512 * 512)
        reuse = cached.get(rounded)
        if reuse:  # a cached block of the same rounded size, as the caching allocator would
            addr = reuse.pop()
            live.append([addr, size])
            entry('alloc', addr, size)
            continue
        if rounded > seg_free:
            seg = 2 << 20 if rounded <= 1 << 20 else max(20 << 20, (rounded + (2 << 20) - 1) // (2 << 20) * (2 << 20))
            segments.append([next_seg, seg])
            entry('segment_alloc', next_seg, seg)
            seg_cursor, seg_free = next_seg, seg
            next_seg += seg
        addr = seg_cursor
        seg_cursor += rounded
        seg_free -= rounded
        live.append([addr, size])
        entry('alloc', addr, size)
    del trace[entries:]

    seg_dicts = [{'device': 0, 'address': a, 'total_size': s, 'allocated_size': 0, 'active_size': 0,
                  'requested_size': 0, 'stream': 0, 'segment_type': 'small' if s == 2 << 20 else 'large',
                  'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [],
                  'blocks': [{'address': a, 'size': s, 'requested_size': 0, 'state': 'inactive', 'frames': []}]}
                 for a, s in segments]
    divisions = {str(1 << i): 0 for i in range(16)}
    settings = {'PYTORCH_CUDA_ALLOC_CONF': '', 'max_split_size': -1, 'garbage_collection_threshold': 0.0,
                'expandable_segments': False, 'pinned_num_register_threads': 1,
                'release_lock_on_cudamalloc': False, 'pinned_use_cuda_host_register': False,
                'graph_capture_record_stream_reuse': False, 'roundup_power2_divisions': divisions}
    return {'segments': seg_dicts, 'device_traces': [trace], 'allocator_settings': settings,
            'external_annotations': []}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('out')
    ap.add_argument('--entries', type=int, default=2_400_000)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--stacks', action='store_true', help='give entries (shared) frames lists')
    a = ap.parse_args()
    snapshot = build(a.entries, a.seed, a.stacks)
    with open(a.out, 'wb') as f:
        pickle.dump(snapshot, f, protocol=4)


if __name__ == '__main__':
    main()
