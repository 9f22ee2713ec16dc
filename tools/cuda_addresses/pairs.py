"""Cross-setting predictions: replay a program's default recording under another run's settings
(and memory fraction) and compare the predicted peak reserved with that run's real one, under both
address models.   python3 tools/cuda_addresses/pairs.py build/fraglab"""
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
    return json.loads(r.stdout)["peak_reserved"]["bytes"]


def main():
    fraglab = sys.argv[1]
    print("| program | settings | capacity | real peak | cuda model | bump model |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for workload, conf, capacity, real, f in runs():
        source = os.path.join(CORPUS, f"{workload}.default.pickle.gz")
        if f == f"{workload}.default.pickle.gz" or f.endswith(".stacks.pickle.gz"):
            continue
        cells = []
        for model in ("cuda", "bump"):
            p = predict(fraglab, source, conf, capacity, model)
            cells.append("exact" if p == real else f"{p - real:+d} B ({(p - real) / 1e6:+.1f} MB)")
        print(f"| {workload} | {conf} | {capacity or '—'} | {real} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
