"""Rewrites a PyTorch 2.11 memory snapshot in the layout PyTorch 2.0 wrote (torch/csrc/cuda/memory_snapshot.cpp
at v2.0.0): segments without 'is_expandable' and 'segment_pool_id'; blocks with 'size', 'state' and a 'history' list
of the allocations that used them ({'addr', 'real_size', 'frames'}) but no 'address' and no 'requested_size';
trace entries without 'time_us' and the newer keys. Usage: to_pytorch20.py IN.pickle.gz OUT.pickle.gz"""
import gzip, pickle, sys

snap = pickle.load(gzip.open(sys.argv[1]))
for seg in snap["segments"]:
    for k in ("is_expandable", "segment_pool_id", "requested_size", "frames"):
        seg.pop(k, None)
    for b in seg["blocks"]:
        addr = b.pop("address")
        req = b.pop("requested_size")
        frames = b.pop("frames", [])
        if b["state"] != "inactive":
            b["history"] = [{"addr": addr, "real_size": req, "frames": frames}]
for trace in snap["device_traces"]:
    for e in trace:
        for k in ("time_us", "compile_context", "user_metadata"):
            e.pop(k, None)
snap.pop("allocator_settings", None)
snap.pop("external_annotations", None)
with gzip.open(sys.argv[2], "wb", compresslevel=9) as f:
    pickle.dump(snap, f, protocol=2)
