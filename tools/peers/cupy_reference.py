#!/usr/bin/env python3
"""cupy_reference: replays a fraglab op list through CuPy's own MemoryPool
(cupy.cuda.MemoryPool, SingleDeviceMemoryPool underneath), the real allocator behind
fraglab's `cupy` policy.

  cupy_reference.py OPS

Each trace stream gets a CuPy stream (handle 0: the null stream); an allocation is made
with its stream current, so the pool files it in that stream's arena, and freed by dropping
the MemoryPointer. 'e' is pool.free_all_blocks(). The pool allocates through a counting
wrapper around cupy.cuda.Memory (cudaMalloc): device calls. Peak reserved is the peak of
pool.total_bytes(), peak in use the peak of pool.used_bytes() (sampled after each malloc).
Output: one JSON object on stdout."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ops_list import read_ops  # noqa: E402

import cupy  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: cupy_reference.py OPS\n")
        return 2
    path = sys.argv[1]
    handles, ops = read_ops(path)
    device_allocs = [0]

    def counting_malloc(size):
        device_allocs[0] += 1
        return cupy.cuda.MemoryPointer(cupy.cuda.Memory(size), 0)

    pool = cupy.cuda.MemoryPool(allocator=counting_malloc)
    streams = [cupy.cuda.Stream.null if h == 0 else cupy.cuda.Stream(non_blocking=True) for h in handles]
    live, stats = {}, dict(allocs=0, frees=0, empties=0, ooms=0, zero_size=0)
    reserved_peak = used_peak = 0
    for op in ops:
        if op[0] == "a":
            _, ident, size, stream = op
            if size == 0:
                stats["zero_size"] += 1  # CuPy hands out a null pointer without the pool
            try:
                with streams[stream]:
                    live[ident] = pool.malloc(size)
            except cupy.cuda.memory.OutOfMemoryError as e:
                stats["ooms"] += 1
                sys.stderr.write(f"cupy_reference: {e}\n")
                break
            stats["allocs"] += 1
            reserved_peak = max(reserved_peak, pool.total_bytes())
            used_peak = max(used_peak, pool.used_bytes())
        elif op[0] == "f":
            if live.pop(op[1], None) is not None:
                stats["frees"] += 1
        else:
            pool.free_all_blocks()
            stats["empties"] += 1
    cupy.cuda.Device().synchronize()
    live.clear()
    pool.free_all_blocks()
    print(json.dumps(dict(tool="cupy_reference", peer=f"cupy {cupy.__version__}", ops=path,
                          gpu=cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                          reserved_peak=reserved_peak, in_use_peak=used_peak,
                          device_allocs=device_allocs[0], **stats)))
    return 1 if stats["ooms"] else 0


if __name__ == "__main__":
    sys.exit(main())
