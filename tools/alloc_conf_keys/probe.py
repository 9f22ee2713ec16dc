"""Which PYTORCH_ALLOC_CONF keys this PyTorch accepts, and what its snapshot records for each.

Run on a GPU machine: python3 tools/alloc_conf_keys/probe.py > keys.jsonl. Each line: the settings text,
whether PyTorch accepted it (with its error otherwise), the snapshot's allocator_settings, and the memory
fraction in force (torch.cuda.get_per_process_memory_fraction, where it exists). fraglab's parser
(allocators/pytorch/config.cpp) must accept what PyTorch accepts and refuse what it refuses.
"""
import json
import os
import subprocess
import sys

CONFS = [
    "max_split_size_mb:128", "max_non_split_rounding_mb:512", "garbage_collection_threshold:0.6",
    "roundup_power2_divisions:4", "roundup_power2_divisions:[256:1,512:2,>:4]", "expandable_segments:True",
    "release_lock_on_cudamalloc:True", "pinned_use_cuda_host_register:True", "pinned_num_register_threads:8",
    "pinned_use_background_threads:True", "pinned_reserve_segment_size_mb:64",
    "graph_capture_record_stream_reuse:True", "per_process_memory_fraction:0.5", "backend:native",
    "release_lock_on_hipmalloc:True", "pinned_use_hip_host_register:True", "large_segment_size_mb:40",
    "throw_on_cudamalloc_oom:True", "no_such_key:1", "max_split_size_mb:10", "garbage_collection_threshold:1.5",
    "expandable_segments:true", "max_split_size_mb:128,,expandable_segments:True",
    " max_split_size_mb : 128 , expandable_segments : True ",
]

CHILD = r"""
import json, torch
torch.cuda.init()
x = torch.empty(1 << 20, device="cuda")
out = {"settings": torch.cuda.memory._snapshot().get("allocator_settings")}
get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
out["fraction"] = get() if get else None
print(json.dumps(out, default=str))
"""


def main():
    for var in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        for conf in CONFS:
            env = {k: v for k, v in os.environ.items() if not k.endswith("ALLOC_CONF")}
            env[var] = conf
            p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
            row = {"variable": var, "conf": conf, "accepted": p.returncode == 0}
            if p.returncode == 0:
                row.update(json.loads(p.stdout.strip().splitlines()[-1]))
            else:
                err = [l for l in p.stderr.strip().splitlines() if l.strip()]
                row["error"] = err[-1] if err else ""
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
