"""The fraglab Python module against the command line, as a user gets both from `pip install .`.

scripts/test-python.sh builds the wheel from the checkout, installs it into a fresh venv and runs this file
with that venv's python (FRAGLAB_SOURCE_DIR: the checkout, for the bundled snapshots). The command line is
the `fraglab` the wheel installed beside the interpreter. Every comparison reads a real recording: a BERT
job with variable-length batches that ran out of memory under a memory fraction of 0.16 on an H100.
"""

import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

import fraglab

SOURCE_DIR = os.environ.get("FRAGLAB_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SNAPSHOTS = os.path.join(SOURCE_DIR, "tests", "data", "snapshots")
OOM = os.path.join(SNAPSHOTS, "bert_varlen_oom.default_cap0.16_ring8000.pickle.gz")
OTHER = os.path.join(SNAPSHOTS, "bert_varlen_oom.expandable_segments-True_large_segment_size_mb-32_cap0.16_ring8000.pickle.gz")
# The installed command line (beside the venv's python), or FRAGLAB_CLI (a build tree's).
CLI = os.environ.get("FRAGLAB_CLI") or os.path.join(os.path.dirname(sys.executable), "fraglab")


def cli(*args, expect=(0, 1)):
    done = subprocess.run([CLI, *args], capture_output=True, text=True)
    if done.returncode not in expect:
        raise AssertionError(f"fraglab {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def cli_json(*args):
    return json.loads(cli(*args, "--json").stdout)


def without(document, *keys):
    """The document less keys that name the input (a path against '<snapshot>') or time the run."""
    if isinstance(document, dict):
        return {k: without(v, *keys) for k, v in document.items() if k not in keys}
    if isinstance(document, list):
        return [without(v, *keys) for v in document]
    return document


class ModuleAgainstCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with gzip.open(OOM, "rb") as f:
            cls.snapshot = pickle.load(f)  # what torch.cuda.memory._snapshot() returned in the job

    def test_diagnose_of_the_snapshot_dict_is_the_clis_json(self):
        mine = fraglab.diagnose(self.snapshot, jobs=2)
        theirs = cli_json("diagnose", OOM, "-j", "2")
        self.assertEqual(mine["trace"], "<snapshot>")
        self.assertEqual(theirs["trace"], OOM)
        self.assertEqual(without(mine, "trace"), without(theirs, "trace"))
        # a real OOM, diagnosed: the request, the state at the failure, the verdict
        self.assertGreater(len(mine["ooms"]), 0)
        self.assertEqual(mine["ooms"][0]["source"], "recorded")
        self.assertGreater(mine["ooms"][0]["request_bytes"], 0)
        self.assertIn(mine["verdict"]["kind"], ("fits", "no_setting_fits", "needs_capacity"))

    def test_a_path_bytes_and_a_loaded_trace_read_the_same(self):
        with open(OOM, "rb") as f:
            data = f.read()
        by_path = fraglab.info(OOM)
        by_bytes = fraglab.info(data)
        by_trace = fraglab.load(self.snapshot).info()
        self.assertEqual(by_path, cli_json("info", OOM))
        self.assertEqual(without(by_bytes, "trace"), without(by_path, "trace"))
        self.assertEqual(without(by_trace, "trace"), without(by_path, "trace"))
        self.assertEqual(len(fraglab.load(OOM)), by_path["events"])

    def test_replay_fidelity_tune_diff_attribution_are_the_clis(self):
        trace = fraglab.load(OOM)
        replays = fraglab.replay(trace, ["pytorch", "bestfit"], on_oom="skip")
        theirs = cli_json("replay", OOM, "-p", "pytorch", "bestfit", "--on-oom", "skip")
        self.assertEqual(without(replays.document, "replay_seconds"), without(theirs, "replay_seconds"))
        self.assertEqual(without(list(replays), "replay_seconds"), without(theirs["results"], "replay_seconds"))
        self.assertEqual([r["policy"] for r in replays], ["pytorch", "bestfit"])
        self.assertIsInstance(fraglab.replay(trace, "pytorch"), list)  # one policy: a list of one
        self.assertEqual(fraglab.fidelity(trace), cli_json("fidelity", OOM))
        self.assertTrue(fraglab.fidelity(trace)["exact"])
        timing = ("search_seconds", "replay_seconds", "threads")
        self.assertEqual(without(fraglab.tune(trace, jobs=2), *timing), without(cli_json("tune", OOM, "-j", "2"), *timing))
        self.assertEqual(fraglab.diff(trace, OTHER), cli_json("diff", OOM, OTHER))
        self.assertEqual(fraglab.attribution(trace, at="oom"), cli_json("info", OOM, "--at", "oom")["at"])

    def test_fit_is_the_clis(self):
        fit = os.path.join(SOURCE_DIR, "tests", "data", "fit")
        pairs = [(os.path.join(fit, f"kv_server.b{b}.default.pickle.gz"), b) for b in (2, 4, 6)]
        # the capacity the job had: a memory fraction of 0.0451 of an H200 (tests/data/fit/README.md)
        mine = fraglab.fit(pairs, capacity=6769955602, jobs=2, search=False)
        theirs = cli_json("fit", *[f"{p}@{b}" for p, b in pairs], "--capacity", "6769955602", "-j", "2",
                          "--no-search")
        self.assertEqual(without(mine, "seconds"), without(theirs, "seconds"))
        self.assertGreater(mine["answers"][0]["largest_batch"], 6)
        with self.assertRaises(ValueError):
            fraglab.fit(pairs[:1], capacity=6769955602)

    def test_errors_carry_the_clis_message_and_offset(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "cut.pickle")
            with gzip.open(OOM, "rb") as f:
                data = f.read()
            with open(bad, "wb") as f:
                f.write(data[: len(data) // 2])
            message = cli("info", bad, expect=(2,)).stderr.strip()
            self.assertTrue(message.startswith("fraglab: error: "), message)
            with self.assertRaises(fraglab.FormatError) as raised:
                fraglab.load(bad)
            self.assertEqual(str(raised.exception), message[len("fraglab: error: "):])
            self.assertIn("offset", str(raised.exception))
            self.assertIsInstance(raised.exception, ValueError)
        with self.assertRaises(fraglab.FormatError) as raised:
            fraglab.load(b"\x80\x04\x95 not a snapshot", name="given")
        self.assertIn("given", str(raised.exception))
        with self.assertRaises(fraglab.PolicyError):
            fraglab.replay(self.snapshot, "pytorch:no_such_option:1")
        with self.assertRaises(ValueError):
            fraglab.diagnose(self.snapshot, at="nowhere")
        with self.assertRaises(TypeError):
            fraglab.load(3.5)

    def test_jupyter_shows_the_block_map_and_tables(self):
        d = fraglab.diagnose(self.snapshot, search=False)
        page = d._repr_html_()
        self.assertIn("<svg", page)
        self.assertEqual(page, d.html())
        self.assertIn("<table>", fraglab.load(OOM)._repr_html_())
        self.assertIn("pytorch", fraglab.replay(OOM, "pytorch")._repr_html_())

    def test_the_hook_diagnoses_in_process_on_a_thread_of_its_own(self):
        import threading
        import types

        import fraglab_hook

        observers = []
        torch = types.ModuleType("torch")
        torch.cuda = types.SimpleNamespace(memory=types.SimpleNamespace(
            _record_memory_history=lambda **kw: None, _snapshot=lambda device=None: self.snapshot))
        torch._C = types.SimpleNamespace(_cuda_attach_out_of_memory_observer=observers.append)
        sys.modules["torch"] = torch
        try:
            with tempfile.TemporaryDirectory() as out:
                printed = []
                hook = fraglab_hook.enable(out, print_fn=printed.append, diagnose_options={"jobs": 2})
                # PyTorch's arguments: device, requested bytes, the allowed maximum, free bytes
                capacity = cli_json("diagnose", OOM, "--no-search")["capacity"]
                observers[0](0, 1 << 20, capacity, 1 << 30)
                self.assertEqual(len(hook.threads), 1)
                self.assertIsNot(hook.threads[0], threading.current_thread())
                hook.wait(600)
                self.assertEqual(len(hook.diagnoses), 1)
                theirs = cli_json("diagnose", hook.dumps[0], "--capacity", str(capacity), "-j", "2")
                self.assertEqual(hook.diagnoses[0], theirs)
                self.assertTrue(os.path.exists(hook.dumps[0][: -len(".pickle.gz")] + ".diagnosis.html"))
                text = "\n".join(printed)
                self.assertIn(f"--capacity {capacity}", text)
                self.assertIn("verdict:", text)
        finally:
            del sys.modules["torch"]


if __name__ == "__main__":
    unittest.main(verbosity=2)
