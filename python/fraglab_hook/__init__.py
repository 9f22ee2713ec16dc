"""fraglab_hook: a memory snapshot and a diagnosis when a PyTorch job runs out of GPU memory.

One call in the training script::

    import fraglab_hook
    fraglab_hook.enable()            # before the first CUDA allocation, ideally

It starts PyTorch's allocator history with a bounded number of entries (the newest are kept,
so a long job costs a fixed amount of host memory), attaches PyTorch's out-of-memory
observer, and on an OOM writes the allocator's snapshot as
``<out_dir>/<prefix>_rank<R>_<YYYYmmdd-HHMMSS-mmm>_pid<P>.pickle.gz`` (the format
``torch.cuda.memory._dump_snapshot`` writes, gzip-compressed, which every fraglab command
reads), prints the exact ``fraglab diagnose`` command for it, and runs it when ``fraglab``
is on PATH (``fraglab diagnose`` says why the request failed and which setting would have
served it: docs/diagnose.md).

Only public-but-underscored PyTorch entry points are used, the ones PyTorch's own
documentation of memory snapshots shows: ``torch.cuda.memory._record_memory_history``,
``torch.cuda.memory._snapshot`` and ``torch._C._cuda_attach_out_of_memory_observer``.
The observer runs inside the failing allocation, before the OutOfMemoryError is raised, so
the snapshot holds the state at the failure and the ``oom`` entry of the history.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

__all__ = ["enable", "disable", "Hook", "probe"]


@dataclass
class Hook:
    """The hook's settings and what it has written (``dumps``)."""

    out_dir: str = "."
    prefix: str = "oom"
    max_entries: int = 100_000
    max_dumps: int = 1
    run_diagnose: bool = True
    capacity: Optional[int] = None
    fraglab: str = "fraglab"
    diagnose_args: Sequence[str] = ()
    diagnose_timeout: float = 600.0
    print_fn: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr, flush=True))
    dumps: List[str] = field(default_factory=list)
    active: bool = True

    # Called by PyTorch's allocator with (device, requested bytes, device allocated, device free).
    def observer(self, device: int, alloc: int, device_alloc: int, device_free: int) -> None:
        if not self.active or len(self.dumps) >= self.max_dumps:
            return
        try:
            self._on_oom(device, alloc, device_free)
        except Exception as error:  # never turn an OOM into a different crash
            self.print_fn(f"fraglab_hook: could not save the OOM snapshot: {error!r}")

    def _on_oom(self, device: int, alloc: int, device_free: int) -> None:
        import torch

        path = self._path()
        snapshot = torch.cuda.memory._snapshot()
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        partial = path + ".part"  # a crash while writing leaves no file that looks complete
        with gzip.open(partial, "wb") as out:
            pickle.dump(snapshot, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, path)
        self.dumps.append(path)
        command = self.diagnose_command(path, device)
        self.print_fn(
            f"fraglab_hook: out of memory on cuda:{device} allocating {alloc} bytes "
            f"({device_free} bytes free on the device); snapshot saved to {path}\n"
            f"fraglab_hook: diagnose with: {shlex.join(command)}"
        )
        if self.run_diagnose:
            self._diagnose(command)

    def _path(self) -> str:
        now = time.time()
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
        name = f"{self.prefix}_rank{_rank()}_{stamp}_pid{os.getpid()}.pickle.gz"
        return os.path.join(self.out_dir, name)

    def diagnose_command(self, path: str, device: int = 0) -> List[str]:
        command = [self.fraglab, "diagnose", path]
        capacity = self.capacity if self.capacity is not None else _fraction_capacity(device)
        if capacity is not None:
            command += ["--capacity", str(capacity)]
        return command + list(self.diagnose_args)

    def _diagnose(self, command: List[str]) -> None:
        executable = shutil.which(command[0])
        if executable is None:
            self.print_fn(f"fraglab_hook: {command[0]} is not on PATH; run the command above where it is")
            return
        try:
            done = subprocess.run([executable] + command[1:], capture_output=True, text=True,
                                  timeout=self.diagnose_timeout)
        except subprocess.TimeoutExpired:
            self.print_fn(f"fraglab_hook: fraglab diagnose took more than {self.diagnose_timeout:.0f} s; stopped")
            return
        self.print_fn(done.stdout + done.stderr)


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
           capacity: Optional[int] = None, prefix: str = "oom", fraglab: str = "fraglab",
           diagnose_args: Sequence[str] = (), stacks: str = "python", context: str = "all",
           print_fn: Optional[Callable[[str], None]] = None) -> Hook:
    """Starts recording and attaches the OOM observer; returns the hook (its ``dumps`` lists the files).

    ``max_entries`` bounds the allocator history (PyTorch keeps the newest entries).
    ``max_dumps`` OOMs are saved (a job that backs off after an OOM may hit several).
    ``capacity`` (bytes) is passed to ``fraglab diagnose --capacity``; by default it is taken
    from ``torch.cuda.set_per_process_memory_fraction`` when one is set.
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
                run_diagnose=run_diagnose, capacity=capacity, fraglab=fraglab, diagnose_args=tuple(diagnose_args))
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
          out_dir: str = "fraglab-probes", capacity: Optional[int] = None, fraglab: str = "fraglab",
          device: int = 0, timeout: float = 600.0, print_fn: Optional[Callable[[str], None]] = None) -> dict:
    """The largest batch that fits, from probe snapshots taken in this process: ``fraglab fit``'s answer.

    ``step_fn(batch)`` runs one step of the program at that batch (forward, backward, optimizer step).
    One warm-up step at the smallest batch first (so the optimizer's state exists for every probe, as it
    does in a real run from its second step), then for each batch: ``gc.collect()``,
    ``torch.cuda.empty_cache()``, the history recorded with Python stacks for ``steps`` steps, the snapshot
    written as ``<out_dir>/probe_b<B>.pickle.gz``. Then ``fraglab fit`` runs on the probes under
    ``capacity`` (default: the memory fraction's limit, else the device's total memory) and its JSON is
    returned (``answers[i].largest_batch`` per setting; docs/diagnose.md). Probes taken in one process
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
    command = [fraglab, "fit", *paths, "--capacity", str(capacity), "--json"]
    say(f"fraglab_hook: probes written; running {shlex.join(command)}")
    executable = shutil.which(fraglab) or (fraglab if os.path.isfile(fraglab) else None)
    if executable is None:
        raise FileNotFoundError(f"{fraglab} is not on PATH: run the command above where it is")
    done = subprocess.run([executable] + command[1:], capture_output=True, text=True, timeout=timeout)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"fraglab fit failed (exit {done.returncode}): {done.stderr.strip()}")
    answer = json.loads(done.stdout)
    for a in answer["answers"]:
        say(f"fraglab_hook: largest batch that fits: {a['largest_batch']} under "
            f"{a['env'] if a['conf'] else 'the default settings'} ({a['label']})")
    return answer
