# Randomised allocator workloads under random PYTORCH_CUDA_ALLOC_CONF settings, recorded on a GPU: a search for
# runs the PyTorch model does not replay exactly (fidelity) or whose plain replay misses the recorded peak.
# Each run's seed draws its settings (expandable segments with or without max_split_size_mb,
# roundup_power2_divisions as a number or a dict, garbage_collection_threshold, a memory fraction or none,
# history started late or into a ring) and its program: training-like steps (parameters kept, activations
# freed in reverse), KV caches grown with torch.cat, a side stream with record_stream, random sizes around the
# allocator's boundaries (1 MiB, 10 MiB, max_split_size_mb), OOMs caught and recovered from, empty_cache().
#   python3 record_random_workloads.py launch OUTDIR FIRST_SEED COUNT PARALLEL
#   python3 record_random_workloads.py run OUTDIR SEED        (a child: the settings are in its environment)
# Findings are checked with scripts/check_snapshots.sh build/fraglab OUTDIR.
import gzip, json, os, pickle, random, subprocess, sys, time

MB = 1 << 20


def settings_for(seed):
    # The allocator's settings and the run's shape, from its seed alone (the launcher and the child agree).
    rng = random.Random(seed * 7919 + 1)
    parts = []
    expandable = rng.random() < 0.5
    if expandable:
        parts.append("expandable_segments:True")
    if rng.random() < 0.6:
        parts.append(f"max_split_size_mb:{rng.choice([21, 32, 64, 128, 256, 512])}")
    r = rng.random()
    if r < 0.2:
        parts.append(f"roundup_power2_divisions:{rng.choice([1, 2, 4, 8, 16])}")
    elif r < 0.3:
        parts.append("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]")
    fraction = None if rng.random() < 0.3 else rng.choice([0.01, 0.015, 0.02, 0.03, 0.05])
    if fraction and rng.random() < 0.4:
        parts.append(f"garbage_collection_threshold:{rng.choice([0.5, 0.6, 0.8])}")
    history = rng.choices(["full", "late", "ring"], [0.7, 0.2, 0.1])[0]
    return ",".join(parts), fraction, history


def sizes(rng, max_split):
    # A request's bytes: mostly a run's own mixture, sometimes a boundary of the allocator.
    edges = [MB, MB + 512, 2 * MB, 10 * MB, 10 * MB + 512, 20 * MB, 20 * MB + 1]
    if max_split:
        edges += [max_split * MB - 512, max_split * MB, max_split * MB + 512]
    k = rng.random()
    if k < 0.05:
        return rng.choice(edges)
    if k < 0.45:
        return rng.randint(1, MB)
    if k < 0.8:
        return rng.randint(MB, 12 * MB)
    if k < 0.97:
        return rng.randint(12 * MB, 96 * MB)
    return rng.randint(96 * MB, 400 * MB)


def program(seed, conf, fraction, history):
    import torch
    dev = torch.device("cuda")
    rng = random.Random(seed)
    max_split = None
    for p in conf.split(","):
        if p.startswith("max_split_size_mb:"):
            max_split = int(p.split(":")[1])
    budget = int((fraction or 0.04) * torch.cuda.get_device_properties(0).total_memory)
    side = torch.cuda.Stream()
    params = [torch.empty(sizes(rng, max_split), dtype=torch.uint8, device=dev) for _ in range(rng.randint(5, 60))]
    live, caches, ooms = [], [], 0
    steps = rng.randint(20, 120)
    for step in range(steps):
        if history == "late" and step == steps // 3:
            torch.cuda.memory._record_memory_history(context=None, max_entries=2_000_000)
        try:
            acts = []
            for _ in range(rng.randint(5, 80)):  # a forward pass: activations kept for the backward
                acts.append(torch.empty(sizes(rng, max_split), dtype=torch.uint8, device=dev))
                if rng.random() < 0.3 and acts:  # temporaries
                    t = torch.empty(sizes(rng, max_split) // 4 + 1, dtype=torch.uint8, device=dev)
                    del t
            for c in range(len(caches)):  # KV caches grown with torch.cat
                grow = torch.empty(rng.choice([512, 4096, 65536, MB]), dtype=torch.uint8, device=dev)
                caches[c] = torch.cat([caches[c], grow])
                del grow
            if rng.random() < 0.15:
                caches.append(torch.empty(rng.randint(MB, 8 * MB), dtype=torch.uint8, device=dev))
            if caches and rng.random() < 0.1:
                caches.pop(rng.randrange(len(caches)))
            if rng.random() < 0.25:  # a side stream's work on a main-stream tensor
                with torch.cuda.stream(side):
                    s = torch.empty(sizes(rng, max_split), dtype=torch.uint8, device=dev)
                    s.fill_(1)
                    if acts:
                        acts[-1].record_stream(side)
                del s
            while acts:  # the backward: activations freed in reverse, gradients made
                a = acts.pop()
                if rng.random() < 0.2:
                    live.append(torch.empty(a.numel() // 2 + 1, dtype=torch.uint8, device=dev))
                del a
            if len(live) > 40 or rng.random() < 0.3:
                rng.shuffle(live)
                del live[: len(live) // 2]
            while sum(t.numel() for t in caches) > budget // 3:
                caches.pop(0)
        except torch.OutOfMemoryError:
            ooms += 1
            acts = []
            del live[: len(live) // 2]
            caches = caches[len(caches) // 2:]
        if rng.random() < 0.03:
            torch.cuda.empty_cache()
    torch.cuda.synchronize()
    return ooms


def run(out, seed):
    import torch
    conf, fraction, history = settings_for(seed)
    torch.cuda.init()
    if fraction:
        torch.cuda.set_per_process_memory_fraction(fraction)
    if history == "full":
        torch.cuda.memory._record_memory_history(context=None, max_entries=2_000_000)
    elif history == "ring":
        torch.cuda.memory._record_memory_history(context=None, max_entries=3000)
    t0 = time.time()
    err = None
    try:
        ooms = program(seed, conf, fraction, history)
    except Exception as e:  # recorded as it is: the snapshot up to here is still a recording
        err, ooms = repr(e)[:300], None
    snap = torch.cuda.memory._snapshot()
    stats = torch.cuda.memory_stats()
    name = f"random_{seed}.pickle.gz"
    with gzip.open(os.path.join(out, name), "wb") as f:
        pickle.dump(snap, f)
    keys = ["reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_alloc_retries", "num_ooms",
            "num_device_alloc", "num_device_free"]
    line = {"workload": "random", "seed": seed, "conf": conf or "default", "memory_fraction": fraction,
            "history": history, "ooms_caught": ooms, "error": err, "wall_s": round(time.time() - t0, 2),
            "total_memory": torch.cuda.get_device_properties(0).total_memory, "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "stats": {k: stats.get(k) for k in keys}, "file": name}
    with open(os.path.join(out, f"stats_{seed}.json"), "w") as f:
        json.dump(line, f)


def launch(out, first, count, parallel):
    os.makedirs(out, exist_ok=True)
    pending = list(range(first, first + count))
    running = []
    while pending or running:
        while pending and len(running) < parallel:
            seed = pending.pop(0)
            conf, _, _ = settings_for(seed)
            env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
            running.append(subprocess.Popen([sys.executable, __file__, "run", out, str(seed)], env=env))
        time.sleep(0.2)
        running = [p for p in running if p.poll() is None]
    with open(os.path.join(out, "stats.jsonl"), "w") as f:
        for seed in range(first, first + count):
            path = os.path.join(out, f"stats_{seed}.json")
            if os.path.exists(path):
                f.write(open(path).read() + "\n")
                os.remove(path)


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        launch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        run(sys.argv[2], int(sys.argv[3]))
