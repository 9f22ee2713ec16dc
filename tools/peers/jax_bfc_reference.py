#!/usr/bin/env python3
"""jax_bfc_reference: replays a fraglab op list through XLA's BFC allocator, as JAX uses it
on a GPU, the real allocator behind fraglab's `bfc` policy.

  jax_bfc_reference.py OPS

Runs with XLA_PYTHON_CLIENT_PREALLOCATE=false (BFC grows on demand: allow_growth, the
bfc policy's default). An allocation of SIZE bytes is a jitted jnp.zeros((SIZE,), uint8)
(one executable per distinct size, compiled before the replay; its output is the only
buffer it allocates),
waited for; a free is Array.delete(). JAX has one compute stream: the trace's streams are
not used (the bfc policy ignores them too). 'e' has no JAX counterpart: counted and
skipped. Peak reserved / in use are the allocator's own statistics
(Device.memory_stats(): peak_pool_bytes, peak_bytes_in_use). Output: one JSON object."""
import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ops_list import read_ops  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: jax_bfc_reference.py OPS\n")
        return 2
    path = sys.argv[1]
    _, ops = read_ops(path)
    device = jax.devices()[0]
    # Compiled before the replay, so nothing the compiler may allocate falls inside it.
    makers = {size: jax.jit(lambda n=size: jnp.zeros((n,), jnp.uint8)).lower().compile()
              for size in sorted({op[2] for op in ops if op[0] == "a"})}
    live = {}
    stats = dict(allocs=0, frees=0, empties_skipped=0, ooms=0, zero_size=0)
    for op in ops:
        if op[0] == "a":
            _, ident, size, _ = op
            if size == 0:
                stats["zero_size"] += 1  # XLA allocates nothing for an empty array
            try:
                live[ident] = makers[size]().block_until_ready()
            except Exception as e:  # XlaRuntimeError: RESOURCE_EXHAUSTED
                stats["ooms"] += 1
                sys.stderr.write(f"jax_bfc_reference: {e}\n")
                break
            stats["allocs"] += 1
        elif op[0] == "f":
            a = live.pop(op[1], None)
            if a is not None:
                a.delete()
                stats["frees"] += 1
        else:
            stats["empties_skipped"] += 1
    ms = device.memory_stats() or {}
    for a in live.values():
        a.delete()
    print(json.dumps(dict(tool="jax_bfc_reference", peer=f"jax {jax.__version__} (XLA BFC)", ops=path,
                          gpu=device.device_kind, reserved_peak=ms.get("peak_pool_bytes"),
                          in_use_peak=ms.get("peak_bytes_in_use"), device_allocs=None,
                          memory_stats=ms, **stats)))
    return 1 if stats["ooms"] else 0


if __name__ == "__main__":
    sys.exit(main())
