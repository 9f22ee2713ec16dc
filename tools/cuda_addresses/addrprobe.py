"""Measure where the CUDA driver places device memory: cuMemAlloc (what cudaMalloc calls) / cuMemFree
and the VMM calls (cuMemAddressReserve, cuMemCreate + cuMemMap, cuMemUnmap, cuMemAddressFree), driven
by an op list, in this (fresh) process. Prints one line per op with the address the driver returned.

    python3 addrprobe.py OPS [--torch]      # --torch: first make PyTorch's context (cuBLAS handle,
                                            # a matmul) so the driver state is what a PyTorch run sees

Op list, one op a line ('#' comments):
    a SIZE          cuMemAlloc(SIZE); the allocation gets the next index (0, 1, ...)
    f IDX           cuMemFree of allocation IDX
    r SIZE          cuMemAddressReserve(SIZE, alignment 0, no fixed address); next range index
    R IDX           cuMemAddressFree of range IDX (everything in it unmapped first by the op list)
    m IDX OFF SIZE  cuMemCreate(SIZE) + cuMemMap at range IDX + OFF + cuMemSetAccess (PyTorch's map)
    u IDX OFF SIZE  cuMemUnmap + cuMemRelease of that mapping
Output: 'a IDX SIZE ADDR', 'r IDX SIZE ADDR', and a first line 'context FREE TOTAL' (cuMemGetInfo).
Only ctypes and the driver library are needed (the GPU machine has no compiler-free alternative
that reaches cuMemAlloc without a CUDA context of its own). See README.md for the measurements.
"""
import ctypes, sys

cu = ctypes.CDLL("libcuda.so.1")
u64, ptr = ctypes.c_uint64, ctypes.c_void_p


def check(rc, what):
    if rc != 0:
        raise SystemExit(f"{what} failed: CUresult {rc}")


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AllocProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Location),
                ("win32HandleMetaData", ptr), ("allocFlags", AllocFlags)]


class AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


def main():
    ops_path = sys.argv[1]
    if "--torch" in sys.argv:
        import torch
        torch.cuda.init()
        a = torch.ones(64, 64, device="cuda")
        (a @ a).sum().item()  # cuBLAS handle and its workspace, as the workloads do early
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ptr()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check(cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    print(f"context {free.value} {total.value}", flush=True)
    prop = AllocProp(type=1, requestedHandleTypes=0, location=Location(type=1, id=dev.value))
    access = AccessDesc(location=Location(type=1, id=dev.value), flags=3)
    allocs, ranges, handles = [], [], {}
    for line in open(ops_path):
        p = line.split("#")[0].split()
        if not p:
            continue
        op, args = p[0], [int(x) for x in p[1:]]
        if op == "a":
            d = u64()
            check(cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(args[0])), f"cuMemAlloc({args[0]})")
            allocs.append(d.value)
            print(f"a {len(allocs) - 1} {args[0]} {d.value:#x}")
        elif op == "f":
            check(cu.cuMemFree_v2(u64(allocs[args[0]])), "cuMemFree")
        elif op == "r":
            d = u64()
            check(cu.cuMemAddressReserve(ctypes.byref(d), ctypes.c_size_t(args[0]), ctypes.c_size_t(0), u64(0),
                                         u64(0)), "cuMemAddressReserve")
            ranges.append((d.value, args[0]))
            print(f"r {len(ranges) - 1} {args[0]} {d.value:#x}")
        elif op == "R":
            check(cu.cuMemAddressFree(u64(ranges[args[0]][0]), ctypes.c_size_t(ranges[args[0]][1])),
                  "cuMemAddressFree")
        elif op == "m":
            at, size = ranges[args[0]][0] + args[1], args[2]
            h = u64()
            check(cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(size), ctypes.byref(prop), u64(0)), "cuMemCreate")
            check(cu.cuMemMap(u64(at), ctypes.c_size_t(size), ctypes.c_size_t(0), h, u64(0)), "cuMemMap")
            check(cu.cuMemSetAccess(u64(at), ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)),
                  "cuMemSetAccess")
            handles[at] = (h, size)
        elif op == "u":
            at = ranges[args[0]][0] + args[1]
            h, size = handles.pop(at)
            check(cu.cuMemUnmap(u64(at), ctypes.c_size_t(size)), "cuMemUnmap")
            check(cu.cuMemRelease(h), "cuMemRelease")
        else:
            raise SystemExit(f"{ops_path}: unknown op {op!r}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
