"""fraglab_hook against a stub of the torch API (CI has no torch): recording is started
bounded, the OOM observer is attached, an OOM writes the snapshot with rank and time in its
name, prints the diagnose command, and diagnoses it on a thread of its own through the fraglab
module (or, where the module cannot be imported, the executable it was given).

Run by CTest (tests/CMakeLists.txt) with PYTHONPATH=<build>/python:python/ (the built module and
the hook's source), FRAGLAB_SOURCE_DIR and FRAGLAB_CLI (the built fraglab).
"""

import contextlib
import gzip
import json
import os
import pickle
import re
import stat
import sys
import tempfile
import types
import unittest

SOURCE_DIR = os.environ.get("FRAGLAB_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
try:
    import fraglab  # noqa: F401  (the built module, first on PYTHONPATH)

    HAVE_MODULE = True
except ImportError:
    HAVE_MODULE = False
SNAPSHOT = os.path.join(SOURCE_DIR, "traces", "corpus", "seed_examples.default.pickle.gz")


class StubTorch:
    """The parts of torch the hook calls, recording what it was asked."""

    def __init__(self, snapshot, fraction=None, total_memory=80 << 30, dist_rank=None):
        self.fraction = fraction
        self.total_memory = total_memory
        self.history_calls = []
        self.observers = []
        torch = types.ModuleType("torch")
        cuda = types.ModuleType("torch.cuda")
        memory = types.ModuleType("torch.cuda.memory")
        memory._record_memory_history = lambda **kw: self.history_calls.append(kw)
        memory._snapshot = lambda device=None: snapshot
        cuda.memory = memory
        cuda.synchronize = lambda device=None: None
        cuda.empty_cache = lambda: self.history_calls.append({"empty_cache": True})
        if fraction is not None:
            cuda.get_per_process_memory_fraction = lambda device=None: fraction
        cuda.get_device_properties = lambda device: types.SimpleNamespace(total_memory=total_memory)
        torch.cuda = cuda
        c = types.ModuleType("torch._C")
        c._cuda_attach_out_of_memory_observer = self.observers.append
        torch._C = c
        dist = types.ModuleType("torch.distributed")
        dist.is_available = lambda: True
        dist.is_initialized = lambda: dist_rank is not None
        dist.get_rank = lambda: dist_rank
        torch.distributed = dist
        self.modules = {"torch": torch, "torch.cuda": cuda, "torch.cuda.memory": memory, "torch._C": c,
                        "torch.distributed": dist}

    def install(self):
        sys.modules.update(self.modules)

    def oom(self, requested=1 << 30):
        # As PyTorch's allocator calls it: device, requested bytes, the allowed maximum (the fraction's
        # limit when one is set, else the device's total memory), free bytes on the device.
        allowed = int(self.fraction * self.total_memory) if self.fraction else self.total_memory
        for observer in self.observers:
            observer(0, requested, allowed, 512 << 20)


@contextlib.contextmanager
def without_the_module():
    """`import fraglab` raises ImportError inside (another Python than the wheel's)."""
    saved = sys.modules.get("fraglab")
    sys.modules["fraglab"] = None
    try:
        yield
    finally:
        if saved is None:
            del sys.modules["fraglab"]
        else:
            sys.modules["fraglab"] = saved


def fake_fraglab(directory):
    """A `fraglab` that writes its arguments to args.txt and prints a line."""
    path = os.path.join(directory, "fraglab")
    with open(path, "w") as f:
        f.write('#!/bin/sh\necho "$@" > "${0%/*}/args.txt"\necho "fake diagnosis"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


class HookTest(unittest.TestCase):
    def setUp(self):
        with gzip.open(SNAPSHOT, "rb") as f:
            self.snapshot = pickle.load(f)
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name
        self.printed = []
        self.saved_env = dict(os.environ)
        for variable in ("RANK", "LOCAL_RANK", "SLURM_PROCID"):
            os.environ.pop(variable, None)
        os.environ["PATH"] = self.out  # no fraglab unless a test puts one there
        import fraglab_hook

        self.hook_module = fraglab_hook

    def tearDown(self):
        if self.hook_module._hook is not None:
            self.hook_module._hook.wait()
        os.environ.clear()
        os.environ.update(self.saved_env)
        for name in list(sys.modules):
            if name == "torch" or name.startswith("torch."):
                del sys.modules[name]
        self.tmp.cleanup()

    def enable(self, stub, **kw):
        stub.install()
        return self.hook_module.enable(self.out, print_fn=self.printed.append, **kw)

    def test_enable_starts_bounded_recording_and_attaches_one_observer(self):
        stub = StubTorch(self.snapshot)
        self.enable(stub, max_entries=5000)
        self.assertEqual(len(stub.history_calls), 1)
        self.assertEqual(stub.history_calls[0]["enabled"], "all")
        self.assertEqual(stub.history_calls[0]["max_entries"], 5000)
        self.assertEqual(stub.history_calls[0]["stacks"], "python")
        self.assertEqual(len(stub.observers), 1)
        with self.assertRaises(ValueError):
            self.hook_module.enable(self.out, max_entries=0)

    def test_oom_writes_the_snapshot_with_rank_and_time_and_prints_the_command(self):
        stub = StubTorch(self.snapshot, dist_rank=3)
        hook = self.enable(stub)
        stub.oom()
        self.assertEqual(len(hook.dumps), 1)
        path = hook.dumps[0]
        self.assertRegex(os.path.basename(path), r"^oom_rank3_\d{8}-\d{6}-\d{3}_pid\d+\.pickle\.gz$")
        with gzip.open(path, "rb") as f:
            self.assertEqual(pickle.load(f), self.snapshot)
        self.assertFalse(os.path.exists(path + ".part"))
        text = "\n".join(self.printed)
        self.assertIn("allocating 1073741824 bytes", text)
        self.assertIn(f"fraglab diagnose {path} --capacity {80 << 30}", text)
        hook.wait()
        stub.oom()  # max_dumps=1: a second OOM (a job backing off) writes nothing more
        self.assertEqual(len(hook.dumps), 1)
        self.assertEqual(len([n for n in os.listdir(self.out) if n.endswith(".pickle.gz")]), 1)

    def test_rank_from_the_launcher_and_capacity_from_the_memory_fraction(self):
        os.environ["RANK"] = "7"
        stub = StubTorch(self.snapshot, fraction=0.25, total_memory=80 << 30)
        hook = self.enable(stub, max_dumps=2)
        stub.oom()
        stub.oom()
        self.assertEqual(len(hook.dumps), 2)
        self.assertNotEqual(hook.dumps[0], hook.dumps[1])
        self.assertIn("_rank7_", hook.dumps[0])
        self.assertIn(f"--capacity {20 << 30}", "\n".join(self.printed))

    def test_a_failing_dump_is_reported_not_raised(self):
        stub = StubTorch(self.snapshot)
        stub.modules["torch.cuda.memory"]._snapshot = lambda device=None: (_ for _ in ()).throw(RuntimeError("boom"))
        hook = self.enable(stub)
        stub.oom()
        self.assertEqual(hook.dumps, [])
        self.assertIn("could not save", "\n".join(self.printed))

    def test_the_executable_diagnoses_where_the_module_cannot_be_imported(self):
        fraglab = fake_fraglab(self.out)
        stub = StubTorch(self.snapshot)
        with without_the_module():
            hook = self.enable(stub, capacity=1 << 30, fraglab=fraglab)
            stub.oom()
            hook.wait()
        with open(os.path.join(self.out, "args.txt")) as f:
            self.assertEqual(f.read().split(), ["diagnose", hook.dumps[0], "--capacity", str(1 << 30)])
        self.assertIn("fake diagnosis", "\n".join(self.printed))

    def test_without_the_module_or_an_executable_it_says_what_to_run(self):
        stub = StubTorch(self.snapshot)
        with without_the_module():
            hook = self.enable(stub)
            stub.oom()
            hook.wait()
        self.assertIn("the fraglab module is not importable", "\n".join(self.printed))

    @unittest.skipUnless(HAVE_MODULE, "the fraglab module is not built (pybind11-dev)")
    def test_the_module_diagnoses_the_dump_off_the_failing_thread(self):
        import threading

        stub = StubTorch(self.snapshot)
        # seed_examples reserves 2 GiB at its peak: under 1.5 GiB its replay runs out of memory.
        hook = self.enable(stub, capacity=3 << 29, diagnose_options={"jobs": 2})
        stub.oom()
        self.assertEqual(len(hook.threads), 1)
        self.assertIsNot(hook.threads[0], threading.current_thread())
        hook.wait()
        text = "\n".join(self.printed)
        self.assertIn("verdict:", text)
        self.assertRegex(text, r"at event \d+ \(replay\)")
        self.assertEqual(hook.diagnoses[0]["capacity"], 3 << 29)
        stem = hook.dumps[0][: -len(".pickle.gz")]
        with open(stem + ".diagnosis.json") as f:
            self.assertEqual(json.load(f), hook.diagnoses[0])

    @unittest.skipUnless(os.environ.get("FRAGLAB_CLI"), "FRAGLAB_CLI not set")
    def test_probe_records_each_batch_and_returns_fits_answer(self):
        stub = StubTorch(self.snapshot)
        stub.install()
        calls = []
        answer = self.hook_module.probe(calls.append, batches=(4, 2), steps=2, out_dir=self.out,
                                        capacity=3 << 30, fraglab=os.environ["FRAGLAB_CLI"],
                                        print_fn=self.printed.append)
        # a warm-up step at the smallest batch, then `steps` steps per batch, smallest first
        self.assertEqual(calls, [2, 2, 2, 4, 4])
        for b in (2, 4):
            self.assertTrue(os.path.exists(os.path.join(self.out, f"probe_b{b}.pickle.gz")))
        self.assertEqual(answer["command"], "fit")
        self.assertEqual([p["batch"] for p in answer["probes"]], [2, 4])
        # the same snapshot at both batches: nothing grows, and the 2 GiB peak fits 3 GiB at any batch searched
        self.assertEqual(answer["size_laws"]["linear"], 0)
        self.assertGreater(answer["answers"][0]["largest_batch"], 4)
        self.assertIn("largest batch that fits", "\n".join(self.printed))
        with self.assertRaises(ValueError):
            self.hook_module.probe(calls.append, batches=(4,), out_dir=self.out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
