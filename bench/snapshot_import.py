#!/usr/bin/env python3
"""Snapshot import against Python and against inflating alone, in the same run: the issue-20 and
issue-39 targets.

For each snapshot, alternately (REPS rounds): `fraglab info SNAPSHOT` (import plus the trace's
statistics), Python's own `pickle.loads(gzip.open(f).read())` (no statistics) and, for a gzip'd
snapshot, inflating alone (`gzip -dc`, zlib's inflate, what "gunzip alone" means), each a fresh
process; wall, CPU (user + sys) and maximum resident memory of each. Prints the best and median
of each and the ratios of the medians: Python's wall time over fraglab's (target >= 5x),
fraglab's over inflating alone (target <= 1.5x) and fraglab's maximum resident memory over the
uncompressed pickle's size (target <= 2x); the targets are checked on pickles of 100 MB or more
(below, process start-up dominates).

Snapshots: the arguments, else FRAGLAB_BENCH_SNAPSHOTS (colon-separated), else the bundled
traces/corpus/bert_varlen_train.default.pickle.gz. A path that does not exist is skipped with a
message (large recordings are not in the repository: tests/tools/scale_snapshot.py makes a
>= 1 GB stand-in from a real one, tests/tools/drop_stacks.py a no-stacks one).
--smoke: one round on the smallest bundled snapshot, no targets (CI: the script keeps running).

usage: bench/snapshot_import.py [--fraglab build-release/fraglab] [--baseline OLD_FRAGLAB] [--reps 3] [--check] [--smoke]
                                [SNAPSHOT ...]
"""
import argparse
import gzip
import os
import resource
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What the issue measures: Python's gzip and its C unpickler (a plain pickle is read as it is).
PY_LOAD = ('import gzip, pickle, sys\n'
           'f = sys.argv[1]\n'
           'gz = open(f, "rb").read(2) == b"\\x1f\\x8b"\n'
           'pickle.loads(gzip.open(f).read() if gz else open(f, "rb").read())\n')


# The targets are about large recordings: below this, process start-up (tens of ms, ~30 MB
# resident for fraglab, more for Python) dominates both figures.
TARGET_MIN_BYTES = 100e6


def run(cmd):
    """Wall seconds, CPU seconds, max resident bytes of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors='replace')
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit('failed: %s\n%s' % (' '.join(cmd), err))
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def pickle_size(path):
    with open(path, 'rb') as f:
        head = f.read(2)
        if head != b'\x1f\x8b':
            return os.path.getsize(path)
    with gzip.open(path, 'rb') as g:  # exact, also past 4 GiB (the trailer is modulo 2^32)
        n = 0
        while True:
            b = g.read(1 << 24)
            if not b:
                return n
            n += len(b)


def row(name, size, fr, py, gz, targets):
    """Prints one binary's table row; returns the targets it misses (where `targets`)."""
    missed = []
    fw = [r[0] for r in fr]
    fmed = statistics.median(fw)
    fc = statistics.median(r[1] for r in fr)
    rss = max(r[2] for r in fr)
    rss_ratio = rss / size
    targets = targets and size >= TARGET_MIN_BYTES
    line = '| %s | %.1f | %.3f / %.3f | %.3f | %.0f |' % (name, size / 1e6, min(fw), fmed, fc, rss / 1e6)
    ratio = ' |'
    if py:
        pw = [r[0] for r in py]
        pc = statistics.median(r[1] for r in py)
        ratio_wall, ratio_cpu = statistics.median(pw) / fmed, pc / fc
        line += ' %.3f / %.3f | %.3f |' % (min(pw), statistics.median(pw), pc)
        ratio = ' **%.1fx**, %.1fx |' % (ratio_wall, ratio_cpu)
        if ratio_wall < 5 and targets:
            missed.append('%s: %.1fx Python, target 5x' % (name, ratio_wall))
    else:
        line += ' not run (--python-max-bytes) | |'
    if gz:
        gw = [r[0] for r in gz]
        over_inflate = fmed / statistics.median(gw)
        line += ' %.3f / %.3f |' % (min(gw), statistics.median(gw)) + ratio + ' **%.2fx** |' % over_inflate
        if over_inflate > 1.5 and targets:
            missed.append('%s: %.2fx inflating alone, target 1.5x' % (name, over_inflate))
    else:
        line += ' not gzip |' + ratio + ' |'
    print(line + ' **%.2fx** |' % rss_ratio, flush=True)
    if rss_ratio > 2 and targets:
        missed.append('%s: resident %.2fx the pickle, target 2x' % (name, rss_ratio))
    return missed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('snapshots', nargs='*')
    ap.add_argument('--fraglab', default=os.path.join(ROOT, 'build-release', 'fraglab'))
    ap.add_argument('--reps', type=int, default=int(os.environ.get('REPS', 3)))
    ap.add_argument('--check', action='store_true', help='exit 1 when a target is missed')
    ap.add_argument('--smoke', action='store_true', help='one round on the smallest bundled snapshot, no targets')
    ap.add_argument('--baseline', help='another fraglab binary (an older build), run in the same rounds: a row of its own')
    ap.add_argument('--python-max-bytes', type=float, default=float(os.environ.get('PYTHON_MAX_BYTES', 5e8)),
                    help='skip Python on pickles larger than this (it needs ~7x the pickle in memory)')
    a = ap.parse_args()
    paths = a.snapshots or [p for p in os.environ.get('FRAGLAB_BENCH_SNAPSHOTS', '').split(':') if p] or \
        [os.path.join(ROOT, 'traces/corpus/bert_varlen_train.default.pickle.gz')]
    if a.smoke:
        corpus = os.path.join(ROOT, 'traces/corpus')
        paths = [min((os.path.join(corpus, f) for f in os.listdir(corpus) if f.endswith('.pickle.gz')),
                     key=os.path.getsize)]
        a.reps, a.check = 1, False
    binaries = [a.fraglab] + ([a.baseline] if a.baseline else [])
    for b in binaries:
        if not os.path.exists(b):
            sys.exit('no fraglab binary at %s (build it, or pass --fraglab)' % b)
    print('| snapshot | pickle MB | fraglab wall s (best / median) | CPU s | max RSS MB | Python wall s (best / median) | CPU s | '
          'inflate alone s (best / median) | Python / fraglab (wall, CPU) | fraglab / inflate alone | RSS / pickle |')
    print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    missed = []
    for path in paths:
        if not os.path.exists(path):
            print('| %s | skipped: not found | | | | | | | | | |' % path)
            continue
        size = pickle_size(path)
        runs = {b: [] for b in binaries}
        py, gz = [], []
        with_python = size <= a.python_max_bytes
        with open(path, 'rb') as f:
            gzipped = f.read(2) == b'\x1f\x8b'
        for _ in range(a.reps):
            for b in binaries:
                runs[b].append(run([b, 'info', path]))
            if with_python:
                py.append(run([sys.executable, '-c', PY_LOAD, path]))
            if gzipped:
                gz.append(run(['gzip', '-dc', path]))
        for b in binaries:
            name = os.path.basename(path) + (' (%s)' % b if a.baseline else '')
            missed += row(name, size, runs[b], py, gz, b == a.fraglab)
    for m in missed:
        print('missed:', m)
    if a.check and missed:
        sys.exit(1)


if __name__ == '__main__':
    main()
