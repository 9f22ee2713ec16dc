"""The CUDA driver's address placement in Python: the rules of sim/cuda_address_space.h (read its
header comment), for the analysis scripts (accuracy.py). Checked against the probe's measurements
like the C++ model:   python3 driver_model.py   (per op list: addresses predicted exactly, first miss)"""
import glob, os
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
CHUNK, PAGE, SMALL = 32 * MiB, 2 * MiB, 512
CONTEXT_BASE, CONTEXT_SIZE = 0x7f0000000000, 512 * MiB
CONTEXT_FREE = [(0x19e00000, 2 * MiB), (0x1e800000, 24 * MiB)]
VMM_BASE = 0x302000000


def ru(n, a):
    return (n + a - 1) // a * a


class AddressSpace:
    def __init__(self):
        self.chunks = {}  # base -> [size, {addr: bytes} of allocations]; dict order = creation order
        used, pos = {}, CONTEXT_BASE
        for off, size in CONTEXT_FREE:  # the context's own chunk: all but its free stretches is in use
            used[pos] = CONTEXT_BASE + off - pos
            pos = CONTEXT_BASE + off + size
        self.chunks[CONTEXT_BASE] = [CONTEXT_SIZE, used]
        self.pinned = CONTEXT_BASE
        self.free = [(VMM_BASE, CONTEXT_BASE)]  # free address space, sorted (begin, end)

    def gaps(self, base):
        size, allocs = self.chunks[base]
        pos = base
        for a in sorted(allocs):
            if a > pos:
                yield pos, a
            pos = max(pos, a + allocs[a])
        if pos < base + size:
            yield pos, base + size

    def alloc(self, size):
        need = ru(max(size, 1), SMALL)
        align = PAGE if need >= PAGE else SMALL
        for base in reversed(list(self.chunks)):  # newest chunk first, lowest address inside it
            for g0, g1 in self.gaps(base):
                a = ru(g0, align)
                if a + need <= g1:
                    self.chunks[base][1][a] = need
                    return a
        return self.carve(need, top_down=True)

    def reserve(self, size):
        return self.carve(ru(size, SMALL), top_down=False)

    def carve(self, need, top_down):
        csize = ru(need, CHUNK)
        order = range(len(self.free) - 1, -1, -1) if top_down else range(len(self.free))
        for i in order:
            b, e = self.free[i]
            if top_down:
                at = (e - csize) // CHUNK * CHUNK
                if e - b >= csize + CHUNK - PAGE and at >= b:
                    break
            else:
                at = ru(b, CHUNK)
                if at + csize <= e:
                    break
        else:
            raise RuntimeError("address space exhausted")
        del self.free[i]
        if at + csize < e:
            self.free.insert(i, (at + csize, e))
        if b < at:
            self.free.insert(i, (b, at))
        self.chunks[at] = [csize, {at: need}]
        return at

    def release(self, addr):
        for base, (size, allocs) in self.chunks.items():
            if addr in allocs and not (base == self.pinned and addr == base):
                del allocs[addr]
                if not allocs:
                    del self.chunks[base]
                    self.free = merge(sorted(self.free + [(base, base + size)]))
                return
        raise KeyError(hex(addr))


def merge(ranges):
    out = []
    for b, e in ranges:
        if out and out[-1][1] == b:
            out[-1] = (out[-1][0], e)
        else:
            out.append((b, e))
    return out


def run(ops):
    """Op lines (addrprobe.py's format) -> [(size, address)] for every a (cudaMalloc) and r (reserve)."""
    space, allocs, ranges, out = AddressSpace(), [], [], []
    for line in ops:
        p = line.split()
        if not p:
            continue
        if p[0] == "a":
            allocs.append(space.alloc(int(p[1])))
            out.append((int(p[1]), allocs[-1]))
        elif p[0] == "f":
            space.release(allocs[int(p[1])])
        elif p[0] == "r":
            ranges.append(space.reserve(int(p[1])))
            out.append((int(p[1]), ranges[-1]))
        elif p[0] == "R":
            space.release(ranges[int(p[1])])
    return out


def main():
    for f in sorted(glob.glob(os.path.join(HERE, "data/ops/*.ops"))):
        name = os.path.basename(f)[:-4]
        pred = run(open(f).read().splitlines())
        meas = [(int(l.split()[2]), int(l.split()[3], 16))
                for l in open(os.path.join(HERE, f"data/measured/{name}.plain1.txt")) if l[:2] in ("a ", "r ")]
        # cudaMalloc's region moves with the process's mmap base: one offset; the reserve region is fixed
        off = Counter(m - p for (_, p), (_, m) in zip(pred, meas) if m >= 1 << 44).most_common(1)
        off = off[0][0] if off else 0
        ok = [m == (p + off if m >= 1 << 44 else p) for (_, p), (_, m) in zip(pred, meas)]
        first = next((i for i, x in enumerate(ok) if not x), None)
        print(f"{name:75s} {sum(ok)}/{len(meas)} first mismatch: {first}")


if __name__ == "__main__":
    main()
