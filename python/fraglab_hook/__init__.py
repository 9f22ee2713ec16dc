"""fraglab_hook: a memory snapshot and a diagnosis when a PyTorch job runs out of GPU memory.

One call in the training script::

    import fraglab_hook
    fraglab_hook.enable()            # before the first CUDA allocation, ideally

It starts PyTorch's allocator history with a bounded number of entries (the newest are kept,
so a long job costs a fixed amount of host memory), attaches PyTorch's out-of-memory
observer, and on an OOM writes the allocator's snapshot as
``<out_dir>/<prefix>_rank<R>_<YYYYmmdd-HHMMSS-mmm>_pid<P>.pickle.gz`` (the format
``torch.cuda.memory._dump_snapshot`` writes, gzip-compressed, which every fraglab command
reads) and prints the ``fraglab diagnose`` command for it. The diagnosis itself (why the
request failed and which setting would have served it: docs/diagnose.md) runs on a thread of
its own through the ``fraglab`` module, in this process, after the observer has returned: the
OutOfMemoryError propagates at once (a rank of a DDP job does not keep the others waiting in a
collective while it is diagnosed), the module releases the GIL while it works, and the
interpreter waits for the diagnosis before it exits. It is printed and written beside the
snapshot (``.diagnosis.json``, and ``.diagnosis.html`` with the block map at the OOM).

Only public-but-underscored PyTorch entry points are used, the ones PyTorch's own
documentation of memory snapshots shows: ``torch.cuda.memory._record_memory_history``,
``torch.cuda.memory._snapshot`` and ``torch._C._cuda_attach_out_of_memory_observer``.
The observer runs inside the failing allocation, before the OutOfMemoryError is raised, so
the snapshot holds the state at the failure and the ``oom`` entry of the history. PyTorch
calls it with (device, requested bytes, the allowed maximum, free bytes on the device): the
allowed maximum is ``set_per_process_memory_fraction``'s limit when one is set, else the
device's total memory; it is the capacity the diagnosis replays under.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import pickle
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

__all__ = ["enable", "disable", "Hook", "probe"]


def _module():
    """The fraglab module, or None with why it is not importable."""
    try:
        import fraglab

        return fraglab, ""
    except ImportError as error:
        return None, str(error)


@dataclass
class Hook:
    """The hook's settings, what it has written (``dumps``) and diagnosed (``diagnoses``)."""

    out_dir: str = "."
    prefix: str = "oom"
    max_entries: int = 100_000
    max_dumps: int = 1
    run_diagnose: bool = True
    capacity: Optional[int] = None
    # Where the fraglab module cannot be imported (another Python), this executable runs the diagnosis.
    fraglab: Optional[str] = None
    diagnose_options: Dict[str, Any] = field(default_factory=dict)
    diagnose_timeout: float = 600.0
    print_fn: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr, flush=True))
    dumps: List[str] = field(default_factory=list)
    diagnoses: List[Any] = field(default_factory=list)
    threads: List[threading.Thread] = field(default_factory=list)
    active: bool = True

    # Called by PyTorch's allocator inside the failing allocation (the GIL held) with the device, the
    # requested bytes, the allowed maximum (set_per_process_memory_fraction x total memory, else the
    # device's total memory: the capacity) and the bytes free on the device.
    def observer(self, device: int, alloc: int, allowed: int, device_free: int) -> None:
        if not self.active or len(self.dumps) >= self.max_dumps:
            return
        try:
            self._on_oom(device, alloc, allowed, device_free)
        except Exception as error:  # never turn an OOM into a different crash
            self.print_fn(f"fraglab_hook: could not save the OOM snapshot: {error!r}")

    def _on_oom(self, device: int, alloc: int, allowed: int, device_free: int) -> None:
        import torch

        path = self._path()
        snapshot = torch.cuda.memory._snapshot()
        data = pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        partial = path + ".part"  # a crash while writing leaves no file that looks complete
        with gzip.open(partial, "wb", compresslevel=1) as out:
            out.write(data)
        os.replace(partial, path)
        self.dumps.append(path)
        capacity = self.capacity if self.capacity is not None else (allowed if allowed > 0 else None)
        command = self.diagnose_command(path, capacity)
        self.print_fn(
            f"fraglab_hook: out of memory on cuda:{device} allocating {alloc} bytes "
            f"(capacity {allowed} bytes, {device_free} bytes free on the device); snapshot saved to {path}\n"
            f"fraglab_hook: diagnose with: {shlex.join(command)}"
        )
        if self.run_diagnose:
            thread = threading.Thread(target=self._diagnose, args=(data, path, capacity, command),
                                      name="fraglab-oom-diagnosis")
            self.threads.append(thread)
            thread.start()  # not a daemon: the interpreter waits for it after the OOM has propagated

    def _path(self) -> str:
        now = time.time()
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
        name = f"{self.prefix}_rank{_rank()}_{stamp}_pid{os.getpid()}.pickle.gz"
        return os.path.join(self.out_dir, name)

    def diagnose_command(self, path: str, capacity: Optional[int] = None) -> List[str]:
        """The command line that diagnoses `path` (what the hook runs in-process through the module)."""
        command = [self.fraglab or "fraglab", "diagnose", path]
        if capacity is not None:
            command += ["--capacity", str(capacity)]
        return command

    def _diagnose(self, data: bytes, path: str, capacity: Optional[int], command: List[str]) -> None:
        try:
            fraglab, why = _module()
            if fraglab is not None:
                self._diagnose_in_process(fraglab, data, path, capacity)
            elif self.fraglab:
                self._diagnose_with_executable(command)
            else:
                self.print_fn(f"fraglab_hook: the fraglab module is not importable ({why}); "
                              "run the command above where fraglab is installed")
        except Exception as error:
            self.print_fn(f"fraglab_hook: the diagnosis failed: {error}")

    def _diagnose_in_process(self, fraglab, data: bytes, path: str, capacity: Optional[int]) -> None:
        options = {"jobs": 4, **self.diagnose_options}
        diagnosis = fraglab.diagnose(fraglab.load(data, name=path), capacity=capacity, **options)
        self.diagnoses.append(diagnosis)
        stem = path[: -len(".pickle.gz")] if path.endswith(".pickle.gz") else path
        with open(stem + ".diagnosis.json", "w") as out:
            json.dump(diagnosis, out, indent=2)
        with open(stem + ".diagnosis.html", "w") as out:
            out.write(diagnosis.html())
        self.print_fn(_summary(diagnosis) + f"\nfraglab_hook: written {stem}.diagnosis.json and .diagnosis.html")

    def _diagnose_with_executable(self, command: List[str]) -> None:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=self.diagnose_timeout)
        except subprocess.TimeoutExpired:
            self.print_fn(f"fraglab_hook: fraglab diagnose took more than {self.diagnose_timeout:.0f} s; stopped")
            return
        self.print_fn(done.stdout + done.stderr)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Waits for the diagnoses started so far."""
        for thread in list(self.threads):
            thread.join(timeout)


def _summary(d: dict) -> str:
    """The diagnosis in a few lines: each OOM's numbers and the verdict."""
    lines = []
    for oom in d["ooms"]:
        lines.append(
            f"fraglab_hook: at event {oom['event_index']} ({oom['source']}): request {oom['request_bytes']} bytes, "
            f"reserved {oom['reserved_bytes']}, allocated {oom['allocated_bytes']}, free inside reserved "
            f"{oom['free_bytes']} (largest free range {oom['largest_free_bytes']})")
    lines.append(f"fraglab_hook: verdict: {d['verdict']['text']}")
    return "\n".join(lines)


_hook: Optional[Hook] = None


def _rank() -> int:
    """The process's rank: torch.distributed's when initialised, else the launcher's RANK."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    for variable in ("RANK", "LOCAL_RANK", "SLURM_PROCID"):
        value = os.environ.get(variable)
        if value is not None and value.isdigit():
            return int(value)
    return 0


def _fraction_capacity(device: int) -> Optional[int]:
    """The allocator's limit under torch.cuda.set_per_process_memory_fraction, when set (< 1)."""
    try:
        import torch

        get_fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
        if get_fraction is None:
            return None
        fraction = float(get_fraction(device))
        if not 0 < fraction < 1:
            return None
        # PyTorch's allowed_memory_maximum: fraction x the device's total memory.
        return int(fraction * torch.cuda.get_device_properties(device).total_memory)
    except Exception:
        return None


def enable(out_dir: str = ".", *, max_entries: int = 100_000, max_dumps: int = 1, run_diagnose: bool = True,
           capacity: Optional[int] = None, prefix: str = "oom", fraglab: Optional[str] = None,
           diagnose_options: Optional[Dict[str, Any]] = None, stacks: str = "python", context: str = "all",
           print_fn: Optional[Callable[[str], None]] = None) -> Hook:
    """Starts recording and attaches the OOM observer; returns the hook (its ``dumps`` lists the files).

    ``max_entries`` bounds the allocator history (PyTorch keeps the newest entries).
    ``max_dumps`` OOMs are saved (a job that backs off after an OOM may hit several).
    ``capacity`` (bytes) is the device's for the diagnosis; by default the allowed maximum PyTorch
    passes the observer (the memory fraction's limit, else the device's total memory).
    ``diagnose_options``: keyword arguments of ``fraglab.diagnose`` (``jobs`` defaults to 4).
    ``fraglab``: an executable to diagnose with where the fraglab module cannot be imported.
    ``stacks``/``context`` are ``_record_memory_history``'s: Python stacks of each allocation
    let diagnose attribute stranded memory to the lines that allocated it.
    Calling it again replaces the previous hook's settings.
    """
    global _hook
    import torch

    if max_entries <= 0:
        raise ValueError("max_entries must be positive")
    torch.cuda.memory._record_memory_history(enabled="all", context=context, stacks=stacks, max_entries=max_entries)
    hook = Hook(out_dir=out_dir, prefix=prefix, max_entries=max_entries, max_dumps=max_dumps,
                run_diagnose=run_diagnose, capacity=capacity, fraglab=fraglab,
                diagnose_options=dict(diagnose_options or {}))
    if print_fn is not None:
        hook.print_fn = print_fn
    if _hook is not None:
        _hook.active = False  # PyTorch has no detach: the old observer stays attached, silenced
    _hook = hook
    torch._C._cuda_attach_out_of_memory_observer(hook.observer)
    return hook


def disable() -> None:
    """Stops recording and silences the observer (PyTorch offers no way to detach it)."""
    global _hook
    import torch

    if _hook is not None:
        _hook.active = False
        _hook = None
    torch.cuda.memory._record_memory_history(enabled=None)


def probe(step_fn: Callable[[int], object], batches: Sequence[int] = (4, 6), *, steps: int = 3,
          out_dir: str = "fraglab-probes", capacity: Optional[int] = None, fraglab: Optional[str] = None,
          device: int = 0, timeout: float = 600.0, print_fn: Optional[Callable[[str], None]] = None) -> dict:
    """The largest batch that fits, from probe snapshots taken in this process: ``fraglab fit``'s answer.

    ``step_fn(batch)`` runs one step of the program at that batch (forward, backward, optimizer step).
    One warm-up step at the smallest batch first (so the optimizer's state exists for every probe, as it
    does in a real run from its second step), then for each batch: ``gc.collect()``,
    ``torch.cuda.empty_cache()``, the history recorded with Python stacks for ``steps`` steps, the snapshot
    written as ``<out_dir>/probe_b<B>.pickle.gz``. Then ``fraglab.fit`` runs on the probes under
    ``capacity`` (default: the memory fraction's limit, else the device's total memory) and its JSON is
    returned (through the ``fraglab`` executable given as ``fraglab`` where the module cannot be imported) (``answers[i].largest_batch`` per setting; docs/diagnose.md). Probes taken in one process
    begin from the state the program left, so the answer is a good estimate; for the exact answer record
    each probe in a fresh process and run ``fraglab fit`` on them (docs/diagnose.md).
    """
    import torch

    say = print_fn or (lambda text: print(text, file=sys.stderr, flush=True))
    batches = sorted({int(b) for b in batches})
    if len(batches) < 2 or batches[0] <= 0:
        raise ValueError("probe needs two or more distinct positive batches")
    if steps <= 0:
        raise ValueError("steps must be positive")
    os.makedirs(out_dir, exist_ok=True)
    step_fn(batches[0])  # warm-up: the optimizer's state, cuBLAS's workspaces
    paths = []
    for batch in batches:
        torch.cuda.synchronize()
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python")
        try:
            for _ in range(steps):
                step_fn(batch)
            torch.cuda.synchronize()
            snapshot = torch.cuda.memory._snapshot()
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
        path = os.path.join(out_dir, f"probe_b{batch}.pickle.gz")
        partial = path + ".part"
        with gzip.open(partial, "wb") as out:
            pickle.dump(snapshot, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, path)
        paths.append(f"{path}@{batch}")
    if capacity is None:
        capacity = _fraction_capacity(device)
    if capacity is None:
        capacity = int(torch.cuda.get_device_properties(device).total_memory)
    command = [fraglab or "fraglab", "fit", *paths, "--capacity", str(capacity), "--json"]
    module, why = _module()
    if module is not None:
        say(f"fraglab_hook: probes written; fitting (the command line's {shlex.join(command)})")
        answer = dict(module.fit([(p.rsplit("@", 1)[0], int(p.rsplit("@", 1)[1])) for p in paths],
                                 capacity=capacity))
    elif fraglab is None:
        raise ImportError(f"the fraglab module is not importable ({why}): run {shlex.join(command)} where it is")
    else:
        say(f"fraglab_hook: probes written; running {shlex.join(command)}")
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"fraglab fit failed (exit {done.returncode}): {done.stderr.strip()}")
        answer = json.loads(done.stdout)
    for a in answer["answers"]:
        say(f"fraglab_hook: largest batch that fits: {a['largest_batch']} under "
            f"{a['env'] if a['conf'] else 'the default settings'} ({a['label']})")
    return answer
