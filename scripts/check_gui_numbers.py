#!/usr/bin/env python3
"""The numbers fraglab-gui draws, checked against PyTorch's own counters and `fraglab info --json`.

A headless screenshot is pixels; `--screenshot-numbers FILE` writes beside it the numbers the views
formatted in that frame (gui/model/shown_numbers.h). For each snapshot, with the recorded lane (what
PyTorch's allocator did):

  1. `--view fragmentation --at peak`: the timeline's peak allocated and peak reserved, and the
     toolbar's peak, equal PyTorch's `allocated_bytes.all.peak` / `reserved_bytes.all.peak` from the
     run's stats.jsonl line (where the history starts with the run: a late start or a ring misses
     part of it); the fragmentation panel's requested bytes at the cursor (PyTorch's requested_bytes:
     a block's until its free completes) equal what `fraglab info --json --at` says is live there (the CLI reads a moment just before an event, the
     GUI's cursor just after it).
  2. `--view oom --at oom` (the first recorded OOM, else the peak): the OOM view's reserved, allocated,
     free inside reserved, rounding waste, free ranges and largest free range, and then
  3. `--view fragmentation --at E` with E the cursor event the OOM view names as the same state: the
     fragmentation panel shows the same six numbers (one truth in every view).

usage: scripts/check_gui_numbers.py --gui build/gui/fraglab-gui --fraglab build/fraglab [SNAPSHOT ...]
Snapshots default to a set of real recordings (corpus and bundled, with OOMs and without) that have a
stats.jsonl line. Exit 0 when every check holds, 1 when one does not (each printed), 2 on bad usage.
Needs xvfb-run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = [
    'traces/corpus/gpt2_train.default.pickle.gz',
    'traces/corpus/gpt2_train.expandable.pickle.gz',
    'traces/corpus/gpt2_train.max_split_size_mb-128.pickle.gz',
    'traces/corpus/side_stream_prefetch.default.pickle.gz',
    'tests/data/snapshots/kv_prealloc_serve.default_left6.pickle.gz',
    'tests/data/snapshots/gpt2_oom_backoff.expandable_cap0.12.pickle.gz',
    'tests/data/snapshots/bert_varlen_oom.max_split_size_mb-128_left12.8.pickle.gz',
]
SAME = ['reserved', 'allocated', 'free_in_reserved', 'rounding_waste', 'free_ranges', 'largest_free_range']


def stats_line(snapshot):
    """The run's stats.jsonl line (the file beside it), or None."""
    path = os.path.join(os.path.dirname(snapshot), 'stats.jsonl')
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d.get('file') == os.path.basename(snapshot):
                return d
    return None


class Checker:
    def __init__(self, gui, fraglab, tmp):
        self.gui, self.fraglab, self.tmp = gui, fraglab, tmp
        self.failures = 0
        self.checks = 0

    def shot(self, snapshot, *args):
        png = os.path.join(self.tmp, 'shot.png')
        numbers = os.path.join(self.tmp, 'shot.json')
        cmd = ['xvfb-run', '-a', '-s', '-screen 0 1280x1024x24', self.gui, snapshot, '--policy', 'recorded',
               '--width', '1200', '--height', '800', '--screenshot', png, '--screenshot-numbers', numbers, *args]
        for attempt in range(3):  # xvfb-run's own failures (3, 5, 6) say nothing about the app
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode not in (3, 5, 6):
                break
        if r.returncode != 0:
            raise RuntimeError('%s failed (%d): %s' % (' '.join(cmd), r.returncode, r.stderr.strip()))
        with open(numbers) as f:
            return json.load(f)

    def info_at(self, snapshot, at):
        r = subprocess.run([self.fraglab, 'info', '--json', '--at', str(at), snapshot], capture_output=True,
                           text=True, check=True)
        return json.loads(r.stdout)

    def expect(self, name, what, shown, truth):
        self.checks += 1
        if shown != truth:
            self.failures += 1
            print('  MISMATCH %s: %s: the GUI shows %s, the truth is %s' % (name, what, shown, truth))

    def check(self, snapshot):
        name = os.path.relpath(snapshot, ROOT) if snapshot.startswith(ROOT) else snapshot
        at_peak = self.shot(snapshot, '--view', 'fragmentation', '--at', 'peak')
        stats = stats_line(snapshot)
        whole = stats and stats.get('record', 'start') == 'start' and not stats.get('max_entries')
        if whole:
            s = stats['stats']
            self.expect(name, 'peak allocated (timeline)', at_peak['timeline.peak_allocated']['bytes'],
                        s['allocated_bytes.all.peak'])
            self.expect(name, 'peak reserved (timeline)', at_peak['timeline.peak_reserved']['bytes'],
                        s['reserved_bytes.all.peak'])
            self.expect(name, 'peak reserved (toolbar)', at_peak['toolbar.peak_reserved.recorded'],
                        s['reserved_bytes.all.peak'])
        cursor = at_peak['cursor']
        panel = at_peak['fragmentation']
        self.expect(name, 'the panel\'s event is the cursor', panel['event'], cursor)
        live = self.info_at(snapshot, cursor + 1)['at'][0]['live_bytes']
        # Both count a block's requested bytes until its free completes (PyTorch's requested_bytes).
        self.expect(name, 'requested bytes live after event %d (fraglab info --at %d)' % (cursor, cursor + 1),
                    panel['requested'], live)

        at_oom = self.shot(snapshot, '--view', 'oom', '--at', 'oom')
        oom = at_oom['oom']
        same_at = at_oom['oom.same_as_cursor_at']
        there = self.shot(snapshot, '--view', 'fragmentation', '--at', str(same_at))['fragmentation']
        for key in SAME:
            self.expect(name, '%s: OOM view (before event %d) against the fragmentation panel at event %d' %
                        (key, oom['before_event'], same_at), oom[key], there[key])
        # Blocks the program freed that still await other streams (record_stream): shown apart by both.
        self.expect(name, 'awaiting streams: OOM view against the fragmentation panel',
                    oom.get('awaiting_streams', 0), there.get('awaiting_streams', 0))
        print('%s: %s; OOM view at %d' % (name, 'peaks checked against stats.jsonl' if whole else
                                          'no whole-run stats line', oom['before_event']))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--gui', default=os.path.join(ROOT, 'build/gui/fraglab-gui'))
    ap.add_argument('--fraglab', default=os.path.join(ROOT, 'build/fraglab'))
    ap.add_argument('snapshots', nargs='*')
    a = ap.parse_args()
    if not shutil.which('xvfb-run'):
        sys.exit('check_gui_numbers: xvfb-run is needed')
    snapshots = a.snapshots or [os.path.join(ROOT, s) for s in DEFAULT]
    with tempfile.TemporaryDirectory() as tmp:
        c = Checker(a.gui, a.fraglab, tmp)
        for s in snapshots:
            if not os.path.exists(s):
                print('check_gui_numbers: no such file: %s' % s, file=sys.stderr)
                sys.exit(2)
            c.check(s)
    print('%d checks, %d mismatches' % (c.checks, c.failures))
    sys.exit(1 if c.failures else 0)


if __name__ == '__main__':
    main()
