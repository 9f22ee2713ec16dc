"""Peaks predicted under both address models against real runs (traces/corpus and recordings/):
1. each recording replayed under its own settings (plain `fraglab replay --policy pytorch`);
2. a program's default recording replayed under another run's settings (and memory fraction).
    python3 tools/cuda_addresses/pairs.py build/fraglab"""
import json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "traces/corpus")
RECORDED = os.path.join(ROOT, "tools/cuda_addresses/recordings")


def runs():
    """(workload, conf, capacity, real peak, file) of every real run we have."""
    out = []
    for line in open(os.path.join(CORPUS, "stats.jsonl")):
        j = json.loads(line)
        out.append((j["workload"], j["conf"], j.get("capacity_bytes"), j["stats"]["reserved_bytes.all.peak"],
                    j["file"]))
    for name in sorted(os.listdir(RECORDED)):
        if name.endswith(".json"):
            j = json.load(open(os.path.join(RECORDED, name)))
            out.append((j["workload"], j["conf"], j.get("capacity_bytes"), j["stats"]["reserved_bytes.all.peak"],
                        j["file"]))
    return out


def predict(fraglab, source, conf, capacity, addresses):
    policy = "pytorch" if conf == "default" else f"pytorch:{conf}"
    cmd = [fraglab, "replay", source, "--policy", policy, "--json", "--addresses", addresses]
    if capacity:
        cmd += ["--capacity", str(capacity)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return json.loads(r.stdout)["results"][0]["peak_reserved"]


def path_of(f):
    return os.path.join(CORPUS, f) if os.path.exists(os.path.join(CORPUS, f)) else os.path.join(RECORDED, f)


def cells(fraglab, source, conf, capacity, real):
    out = []
    for model in ("cuda", "bump"):
        p = predict(fraglab, source, conf, capacity, model)
        out.append("exact" if p == real else f"{p - real:+d} B ({(p - real) / 1e6:+.1f} MB)")
    return out


def main():
    fraglab = sys.argv[1]
    print("Each recording under its own settings:\n")
    print("| recording | capacity | real peak | cuda model | bump model |")
    print("| --- | --- | ---: | ---: | ---: |")
    for workload, conf, capacity, real, f in runs():
        c = cells(fraglab, path_of(f), "default", capacity, real)  # plain pytorch: the recorded settings
        print(f"| {f.replace('.pickle.gz', '')} | {capacity or '—'} | {real} | {c[0]} | {c[1]} |", flush=True)
    print("\nThe default recording under another run's settings:\n")
    print("| program | settings | capacity | real peak | cuda model | bump model |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for workload, conf, capacity, real, f in runs():
        source = path_of(f"{workload}.default.pickle.gz")
        if f == f"{workload}.default.pickle.gz" or f.endswith(".stacks.pickle.gz") or conf == "default" and not capacity:
            continue
        c = cells(fraglab, source, conf, capacity, real)
        print(f"| {workload} | {conf} | {capacity or '—'} | {real} | {c[0]} | {c[1]} |", flush=True)


if __name__ == "__main__":
    main()
