#!/usr/bin/env python3
"""A real `export` and `compare`, interrupted by SIGINT or SIGTERM while they write, leave no output and no
temporary file (issue 40: "SIGINT/SIGTERM during export leaves a 76 MB temp file"), and end by the signal.

The signal is sent once a temporary file has appeared in the output folder, i.e. while the output is being
written; a run that had finished by then (a very fast machine) is retried with a larger trace."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

CLI = os.environ.get("FRAGLAB_CLI", "fraglab")


def interrupt(argv, out_dir, sig, timeout=120.0):
    """Runs argv, sends `sig` when a file shows in out_dir; returns (returncode, files left, interrupted)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, restore_signals=True)
    deadline = time.monotonic() + timeout
    sent = False
    while proc.poll() is None and time.monotonic() < deadline:
        if os.listdir(out_dir):
            proc.send_signal(sig)
            sent = True
            break
        time.sleep(0.002)
    proc.communicate(timeout=timeout)
    return proc.returncode, sorted(os.listdir(out_dir)), sent


class InterruptedOutputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fraglab-interrupt-")
        cls.traces = {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def trace(self, allocs):
        if allocs not in self.traces:
            path = os.path.join(self.tmp.name, f"random{allocs}.fltrace")
            subprocess.run([CLI, "gen", "random", "--allocs", str(allocs), "-o", path], check=True,
                           stdout=subprocess.DEVNULL)
            self.traces[allocs] = path
        return self.traces[allocs]

    def check(self, make_argv):
        for sig in (signal.SIGINT, signal.SIGTERM):
            for allocs in (400_000, 1_600_000):
                with self.subTest(signal=sig.name, allocs=allocs):
                    out_dir = tempfile.mkdtemp(dir=self.tmp.name)
                    rc, left, sent = interrupt(make_argv(self.trace(allocs), out_dir), out_dir, sig)
                    if sent and rc == 0:
                        continue  # finished as the signal came: try a larger trace
                    self.assertTrue(sent, "no output file ever appeared")
                    self.assertEqual(rc, -sig, f"ended with {rc}, not by {sig.name}")
                    self.assertEqual(left, [], "an interrupted run left files behind")
                    break
            else:
                self.fail(f"every run finished before {sig.name} reached it")

    def test_export(self):
        self.check(lambda trace, out: [CLI, "export", trace, os.path.join(out, "out.json"), "--policy", "bestfit"])

    def test_replay_timeline(self):
        self.check(lambda trace, out: [CLI, "replay", trace, "--policy", "bestfit", "--no-oracle-bound",
                                       "--timeline", os.path.join(out, "timeline.csv")])


if __name__ == "__main__":
    unittest.main(verbosity=2, argv=[sys.argv[0]])
