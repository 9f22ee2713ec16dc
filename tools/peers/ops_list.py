"""The plain op list `fraglab ops TRACE -o OPS` writes (format in tools/peers/ops_list.h),
read by the Python peer runners. Bad input: file:line on stderr and exit 2."""
import sys


def fail(path, line, what):
    sys.stderr.write(f"{path}:{line}: {what}\n")
    sys.exit(2)


def read_ops(path):
    """Returns (stream handles, ops); an op is ('a', id, size, stream), ('f', id) or ('e',)."""
    streams, ops, header = None, [], False
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        fail(path, 0, f"cannot open: {e.strerror}")
    for n, text in enumerate(lines, 1):
        if not text or text.startswith("#"):
            continue
        f = text.split()
        try:
            if not header:
                if f[:2] != ["fraglab-ops", "1"]:
                    fail(path, n, "not a fraglab-ops 1 file")
                header = True
            elif f[0] == "streams":
                streams = [int(h) for h in f[2:]]
                if len(streams) != int(f[1]):
                    fail(path, n, "bad streams line")
            elif f[0] == "a":
                op = ("a", int(f[1]), int(f[2]), int(f[3]))
                if streams is None or op[3] >= len(streams):
                    fail(path, n, "stream index out of range")
                ops.append(op)
            elif f[0] == "f":
                ops.append(("f", int(f[1])))
            elif f[0] == "e":
                ops.append(("e",))
            else:
                fail(path, n, f"unknown op '{f[0]}'")
        except (IndexError, ValueError):
            fail(path, n, "bad line")
    if not header:
        fail(path, len(lines), "empty file")
    return streams or [0], ops
