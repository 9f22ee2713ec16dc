#!/usr/bin/env python3
"""Writes the small hostile inputs of tests/data/fuzz-regressions/ (issue 15): decompression
and alias bombs, extreme values, inputs a writer once could not read back. Each is a few KB;
the bombs are what they are relative to docs/limits.md's budget (tests that need a bomb
relative to the default budget lower it, or build the input at run time).

    tests/tools/make_hostile_inputs.py tests/data/fuzz-regressions

The pickles are written opcode by opcode (never with pickle.dumps, which would build the
objects in memory): PROTO 4, then data opcodes only.
"""
import gzip
import os
import struct
import subprocess
import sys


def s(text):  # SHORT_BINUNICODE or BINUNICODE
    b = text.encode() if isinstance(text, str) else text
    return (b"\x8c" + bytes([len(b)]) + b) if len(b) < 256 else (b"X" + struct.pack("<I", len(b)) + b)


def i(v):  # BININT / LONG1
    if 0 <= v < 2**31:
        return b"J" + struct.pack("<i", v)
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def put(k):
    return b"r" + struct.pack("<I", k)  # LONG_BINPUT


def get(k):
    return b"j" + struct.pack("<I", k)  # LONG_BINGET


def dict_of(pairs):  # EMPTY_DICT MARK k v ... SETITEMS
    return b"}(" + b"".join(k + v for k, v in pairs) + b"u"


def snapshot(entries_code, extra=b""):
    """{'device_traces': [[ <entries_code> ]], <extra key/value pairs>}"""
    return b"\x80\x04" + b"}(" + s("device_traces") + b"](" + b"](" + entries_code + b"e" + b"e" + extra + b"u" + b"."


def entry(action, addr, size, frames=b"]"):
    return dict_of([(s("action"), s(action)), (s("addr"), i(addr)), (s("size"), i(size)),
                    (s("stream"), i(0)), (s("frames"), frames)])


def write(out, name, data, compress=False):
    path = os.path.join(out, name)
    with open(path, "wb") as f:
        f.write(gzip.compress(data, 9, mtime=0) if compress else data)
    print(f"{name}: {os.path.getsize(path)} bytes")


def main(out):
    os.makedirs(out, exist_ok=True)
    # Alias bomb: one segment_alloc entry (memoized) referenced 20,000 times in 40 KB of pickle.
    e = entry("segment_alloc", 1 << 32, 2 << 20)
    body = e + put(1) + b"".join(get(1) for _ in range(20000))
    write(out, "pickle-entry-alias.pickle.gz", snapshot(body), compress=True)

    # Alias bomb: a 1 MB frame name (memoized) in 100 distinct stacks; the stack text would
    # be 100 MB from a file of a few KB.
    big = s("f" * (1 << 20)) + put(2)
    frame = dict_of([(s("name"), get(2)), (s("filename"), s("x.py")), (s("line"), i(1))]) + put(3)
    entries = b""
    for k in range(100):
        own = dict_of([(s("name"), s(f"g{k}")), (s("filename"), s("y.py")), (s("line"), i(k))])
        frames = b"](" + (get(3) if k else b"") + own + b"e"
        entries += entry("alloc", (1 << 32) + k * 512, 512, frames)
    first = entry("alloc", 1 << 40, 512, b"](" + big + b"0" + frame + b"e")
    write(out, "pickle-frame-name-alias.pickle.gz", snapshot(first + entries), compress=True)

    # Alias bomb in the settings: one nested dict of 2,000 keys under 2,000 keys.
    inner = b"}(" + b"".join(s(f"k{k}") + i(k) for k in range(2000)) + b"u" + put(4)
    outer = b"}(" + s("a0") + inner + b"".join(s(f"a{k}") + get(4) for k in range(1, 2000)) + b"u"
    write(out, "pickle-settings-alias.pickle.gz",
          snapshot(entry("alloc", 1 << 32, 512), s("allocator_settings") + outer), compress=True)

    # Decompression bomb relative to a lowered budget: 8 MB of pickle padding in 8 KB of gzip.
    pad = b"\x80\x04" + b"(" + b"N" * (8 << 20) + b"1" + b"}."
    write(out, "pickle-gzip-bomb.pickle.gz", pad, compress=True)

    # JSON nesting bomb: one line of 200,000 '[' (nlohmann would build every level).
    write(out, "jsonl-nested-brackets.jsonl.gz", b'{"fraglab_trace":1}\n' + b"[" * 200000 + b"\n", compress=True)

    # Sizes past 2^48 (the simulated device's address space), in every text format.
    write(out, "pickle-alloc-past-2-48.pickle", snapshot(entry("alloc", 1 << 32, (1 << 49) + 512)))
    write(out, "jsonl-alloc-past-2-48.jsonl", b'{"op":"alloc","id":1,"size":562949953421312}\n')
    write(out, "rmm-alloc-past-2-48.csv",
          b"Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,562949953421312,0x0\n")

    # Extreme times (UBSan once saw their differences overflow in stats and export).
    write(out, "jsonl-extreme-times.jsonl",
          b'{"op":"alloc","id":1,"size":512,"t":-9223372036854775808}\n'
          b'{"op":"free","id":1,"t":9223372036854775807}\n')

    # A header whose stack 0 is not the empty stack: converted to native, it could not be read back.
    write(out, "jsonl-stack0-not-empty.jsonl",
          b'{"fraglab_trace":1,"stacks":[[{"name":"f","filename":"a.py","line":1}]]}\n{"op":"alloc","id":1,"size":512}\n')
    write(out, "jsonl-empty.jsonl", b"")
    # A scalar where the snapshot dict goes; a non-dict trace entry; control bytes in an action.
    write(out, "pickle-scalar-root.pickle", b"\x80\x04K\x07.")
    write(out, "pickle-entry-not-dict.pickle", snapshot(i(5)))
    write(out, "pickle-control-bytes.pickle", snapshot(entry("\x1b[31mred\x07", 1 << 32, 512)))

    # A native trace whose meta claims (and really inflates to) 100 MB of JSON whitespace.
    make_native_meta_bomb(os.path.join(out, "native-meta-bomb.fltrace"))


def make_native_meta_bomb(path):
    meta = b" " * (100 << 20) + (b'{"source":"","format":"native","device":0,"streams":[0],'
                                 b'"allocator_settings":{},"stacks":[[]],"dropped_unknown_frees":0}')
    frame = subprocess.run(["zstd", "-19", "-q", "-c"], input=meta, check=True, capture_output=True).stdout
    header = b"FLTRACE\0" + struct.pack("<IIQQ", 1, 32, 0, 0)
    section = b"FLMT" + struct.pack("<IQQ", 0, len(meta), len(frame))
    footer = struct.pack("<QQQ", 32, 0, 0) + b"FLTREND\0"
    with open(path, "wb") as f:
        f.write(header + section + frame + footer)
    print(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/fuzz-regressions")
