"""Write the op lists addrprobe.py runs: each recording's device calls in order (segment_alloc/free ->
a/f; expandable segments -> r + m/u per PyTorch page, as ExpandableSegment does) and synthetic
sequences that test one hypothesis each (see README.md).   python3 make_ops.py CORPUS_DIR OUT_DIR"""
import glob, gzip, os, pickle, sys

MiB = 1 << 20
TOTAL = 85017493504  # the H100 80GB HBM3's totalGlobalMem (traces/corpus/stats.jsonl)


def recording_ops(path):
    snap = pickle.load(gzip.open(path))
    ops, index, ranges, count = [], {}, [], 0  # index: live address -> allocation number
    for e in snap["device_traces"][0]:
        act, addr, size = e["action"], e["addr"], e["size"]
        if act == "segment_alloc":
            index[addr] = count
            count += 1
            ops.append(f"a {size}")
        elif act == "segment_free":
            ops.append(f"f {index.pop(addr)}")
        elif act in ("segment_map", "segment_unmap"):
            r = next((i for i, (b, s, _) in enumerate(ranges) if b <= addr < b + s), None)
            if r is None:  # first map of a new expandable segment: PyTorch reserves its whole range
                page = 20 * MiB if size % (20 * MiB) == 0 else 2 * MiB
                handles = -(-(TOTAL + TOTAL // 8) // page)
                ranges.append([addr, handles * page, page])
                r = len(ranges) - 1
                ops.append(f"r {handles * page}")
            base, _, page = ranges[r]
            for off in range(addr - base, addr - base + size, page):
                ops.append(f"{'m' if act == 'segment_map' else 'u'} {r} {off} {page}")
    return ops


def synthetic():
    s = {}
    s["small_2mib_x24"] = [f"a {2 * MiB}"] * 24
    s["sizes_2_to_128mib"] = [f"a {k * 2 * MiB}" for k in range(1, 65)]
    s["sizes_128_down_to_2mib"] = [f"a {k * 2 * MiB}" for k in range(64, 0, -1)]
    s["remainders_20_then_12"] = [f"a {20 * MiB}"] * 10 + [f"a {12 * MiB}"] * 12 + [f"a {2 * MiB}"] * 8
    # Which freed hole is reused: 10 x 96 MiB, free #2, #5, #8 (in that order), then 3 x 96 MiB.
    s["reuse_holes_96"] = [f"a {96 * MiB}"] * 10 + ["f 2", "f 5", "f 8"] + [f"a {96 * MiB}"] * 3
    s["reuse_holes_96_reverse_free"] = [f"a {96 * MiB}"] * 10 + ["f 8", "f 5", "f 2"] + [f"a {96 * MiB}"] * 3
    # Partial reuse of a hole: top or bottom of it?
    s["split_hole_1gib"] = [f"a {1024 * MiB}"] * 4 + ["f 1"] + [f"a {256 * MiB}"] * 3 + [f"a {48 * MiB}"] * 2
    s["alloc_free_same"] = [f"a {148 * MiB}", "f 0", f"a {148 * MiB}", "f 1", f"a {74 * MiB}", f"a {74 * MiB}"]
    s["gc_like_big"] = [f"a {1572 * MiB}"] * 3 + ["f 1", f"a {74 * MiB}", f"a {148 * MiB}", f"a {786 * MiB}",
                                                 f"a {1572 * MiB}"]
    s["sub_2mib"] = [f"a {n}" for n in (512, 4096, 1 << 20, 512, 1 << 20, 3 << 20, 1 << 20)]
    s["vmm_reserves"] = [f"r {(TOTAL + TOTAL // 8 + 20 * MiB - 1) // (20 * MiB) * 20 * MiB}",
                         f"a {20 * MiB}", f"r {(TOTAL + TOTAL // 8 + 2 * MiB - 1) // (2 * MiB) * 2 * MiB}",
                         f"a {96 * MiB}", f"r {1 << 30}", f"a {2 * MiB}"]
    return s


def main():
    corpus, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(corpus, "*.pickle.gz"))):
        name = os.path.basename(path)[: -len(".pickle.gz")]
        if name.endswith(".stacks"):
            continue  # the same program as gpt2_train.default
        open(os.path.join(out, f"rec.{name}.ops"), "w").write("\n".join(recording_ops(path)) + "\n")
    for name, ops in synthetic().items():
        open(os.path.join(out, f"syn.{name}.ops"), "w").write("\n".join(ops) + "\n")


if __name__ == "__main__":
    main()
