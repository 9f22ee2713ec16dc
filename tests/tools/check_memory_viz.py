#!/usr/bin/env python3
"""Opens a snapshot written by `fraglab export --to snapshot` with PyTorch's own viewer
code (torch.cuda._memory_viz) and prints what it produced, so a run on a machine with
PyTorch shows the export is a snapshot PyTorch accepts.

usage: check_memory_viz.py SNAPSHOT.pickle[.gz] [--html-dir DIR]

Checks, in order: the pickle loads with Python's pickle; segsum() (which asserts that
every segment's blocks add up to its size) and trace() (PyTorch's text rendering of
device_traces) run; trace_plot(), trace_plot(plot_segments=True) and segment_plot()
return HTML. Exit status 0 only if all of them succeed.
"""
import argparse
import gzip
import os
import pickle
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('snapshot')
    ap.add_argument('--html-dir', help='also write the HTML pages here')
    a = ap.parse_args()

    opener = gzip.open if a.snapshot.endswith('.gz') else open
    with opener(a.snapshot, 'rb') as f:
        data = pickle.load(f)

    import torch
    from torch.cuda import _memory_viz as mv

    entries = sum(len(t) for t in data['device_traces'])
    print(f'torch {torch.__version__}: {a.snapshot}: {len(data["segments"])} segments, {entries} trace entries')
    summary = mv.segsum(data)
    print('segsum:', ' | '.join(line for line in summary.splitlines() if line.startswith('total_')))
    text = mv.trace(data)
    print(f'trace: {len(text)} characters, {text.count(chr(10))} lines')
    pages = {
        'trace_plot': mv.trace_plot(data),
        'trace_plot_segments': mv.trace_plot(data, plot_segments=True),
        'segment_plot': mv.segment_plot(data),
    }
    for name, html in pages.items():
        assert '<html>' in html and len(html) > 1000, name
        print(f'{name}: {len(html)} bytes of HTML')
        if a.html_dir:
            os.makedirs(a.html_dir, exist_ok=True)
            with open(os.path.join(a.html_dir, name + '.html'), 'w') as f:
                f.write(html)
    print('OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
