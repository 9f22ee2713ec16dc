"""fraglab in Python: PyTorch's caching allocator modelled, on the snapshot your job recorded.

Each function runs what the ``fraglab`` command of the same name runs, in this process, and returns
what that command prints with ``--json`` as Python objects (the same numbers under the same keys)::

    import torch, fraglab
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    ...                                         # the steps that run out of memory
    snapshot = torch.cuda.memory._snapshot()
    d = fraglab.diagnose(snapshot)              # why the allocation failed, which setting fits
    d["verdict"]["text"]; d                     # in Jupyter: the block map at each OOM

A snapshot is what ``torch.cuda.memory._snapshot()`` returns (a dict: read in memory, no file
written), a path (``.pickle``, ``.pickle.gz``, JSON, or any trace format fraglab reads), the bytes
of a pickled snapshot, or a :class:`Trace` from :func:`load` (load once, ask many questions).
Capacities are bytes (an int) or text such as ``"20GiB"``. Errors are the command line's:
:class:`FormatError` (a ValueError naming the file or snapshot and the byte offset) for a bad
snapshot, :class:`PolicyError` for a bad policy or setting, ValueError for a bad argument.
"""

from __future__ import annotations

import html as _html
import os
import pickle
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

from . import _fraglab

__all__ = ["load", "info", "replay", "fidelity", "tune", "diagnose", "diff", "attribution", "fit", "policies",
           "Trace", "Report", "Diagnosis", "FormatError", "PolicyError", "ANY_DEVICE", "__version__"]
__version__ = "0.1.0"

FormatError = _fraglab.FormatError
PolicyError = _fraglab.PolicyError
ANY_DEVICE = _fraglab.ANY_DEVICE

Capacity = Union[None, int, str]


def _capacity(value: Capacity) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"capacity must be bytes (int) or a size such as '20GiB', not {type(value).__name__}")
    if isinstance(value, int) and value <= 0:
        raise ValueError(f"capacity must be positive, not {value}")
    return str(value)


class Trace:
    """A snapshot or trace loaded once (:func:`load`): pass it to every function instead of the snapshot."""

    def __init__(self, core: "_fraglab.Trace"):
        self._core = core

    name = property(lambda self: self._core.name, doc="how reports name it (its path, or the name given)")
    format = property(lambda self: self._core.format, doc="the format read (pytorch-snapshot, ...)")
    device = property(lambda self: self._core.device, doc="the snapshot's device index read")
    events = property(lambda self: self._core.events, doc="events in the trace")

    def __len__(self) -> int:
        return self._core.events

    def __repr__(self) -> str:
        return f"<fraglab.Trace {self.name!r}: {self.format}, device {self.device}, {self.events} events>"

    def info(self, at: str = "") -> "Report":
        return info(self, at=at)

    def _repr_html_(self) -> str:
        return info(self)._repr_html_()


def load(snapshot: Any, *, name: Optional[str] = None, device: Optional[int] = None) -> Trace:
    """Reads a snapshot (dict, path, bytes) into a :class:`Trace`.

    ``device``: which GPU's history to read from a snapshot of several (default: the one with data).
    ``name``: how reports and errors name it (default: the path, else ``<snapshot>``).
    """
    if isinstance(snapshot, Trace):
        return snapshot
    dev = ANY_DEVICE if device is None else int(device)
    if isinstance(snapshot, (str, os.PathLike)):
        path = os.fspath(snapshot)
        if path == "-":
            raise ValueError("'-' (standard input) is the command line's: pass the snapshot's bytes instead")
        return Trace(_fraglab.load_path(path, dev))
    if isinstance(snapshot, (bytes, bytearray, memoryview)):
        return Trace(_fraglab.load_bytes(bytes(snapshot), name or "<snapshot bytes>", dev))
    if isinstance(snapshot, dict):
        # The dict torch.cuda.memory._snapshot() returns, pickled in memory as _dump_snapshot would write
        # it: fraglab's reader takes only pickle's data opcodes, so anything but plain data is refused.
        data = pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL)
        return Trace(_fraglab.load_bytes(data, name or "<snapshot>", dev))
    raise TypeError(
        f"a snapshot is a dict (torch.cuda.memory._snapshot()), a path, bytes or a fraglab.Trace, "
        f"not {type(snapshot).__name__}")


def _core(snapshot: Any) -> "_fraglab.Trace":
    return load(snapshot)._core


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return f"<i>{len(value)} {'keys' if isinstance(value, dict) else 'items'}</i>"
    return _html.escape(str(value))


def _table(rows: Iterable[Tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th style='text-align:left'>{_html.escape(str(k))}</th><td>{_cell(v)}</td></tr>"
                   for k, v in rows)
    return f"<table>{body}</table>"


class Report(dict):
    """A command's JSON document as a dict; in Jupyter a table of its numbers."""

    command = ""

    def _repr_html_(self) -> str:
        title = f"<b>fraglab {self.command}</b>" if self.command else ""
        return title + _table((k, v) for k, v in self.items() if not isinstance(v, (dict, list)) or v)


class ReplayResults(list):
    """``replay``'s results: one dict per policy, in the order given (``replay --json``'s ``results``);
    ``document`` the whole ``--json`` document; ``notes`` what the command prints on stderr."""

    notes: List[str] = []
    document: dict = {}

    def _repr_html_(self) -> str:
        head = ["policy", "peak reserved", "peak allocated", "live-bytes bound", "OOMs", "device calls"]
        rows = []
        for r in self:
            rows.append([r.get("policy"), r.get("peak_reserved"), r.get("peak_allocated"),
                         r.get("live_bytes_bound"), len(r.get("ooms", [])) if isinstance(r.get("ooms"), list)
                         else r.get("ooms"), r.get("device_calls")])
        th = "".join(f"<th>{h}</th>" for h in head)
        trs = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
        notes = "".join(f"<p>note: {_html.escape(n)}</p>" for n in self.notes)
        return f"<table><tr>{th}</tr>{trs}</table>{notes}"


class Diagnosis(Report):
    """``diagnose``'s JSON document; ``html()`` (and Jupyter) shows the page ``diagnose --html`` writes:
    the numbers and the block map at each OOM."""

    command = "diagnose"

    def __init__(self, core: "_fraglab.DiagnoseResult"):
        super().__init__(core.json())
        self._result = core
        self.note = core.note

    def html(self) -> str:
        return self._result.html()

    def _repr_html_(self) -> str:
        return self.html()


def _report(command: str, document: dict) -> Report:
    r = Report(document)
    r.command = command
    return r


def info(snapshot: Any, *, at: str = "") -> Report:
    """``fraglab info --json``: what the trace holds; ``at`` ("oom", "peak" or an event index) adds who
    holds the live memory there (``at`` in the result)."""
    return _report("info", _fraglab.info(_core(snapshot), at))


def attribution(snapshot: Any, *, at: str = "peak") -> List[dict]:
    """Who holds the live memory at ``at`` ("oom": each recorded OOM, "peak", or an event index): by the
    line of your code, category (parameters, activations, optimizer state, ...), step and phase; one dict
    per moment (``info --at``'s ``at``)."""
    return _fraglab.attribution(_core(snapshot), at)


def replay(snapshot: Any, policy: Union[str, Sequence[str]] = "pytorch", *, capacity: Capacity = None,
           addresses: str = "auto", pools: str = "", on_oom: str = "stop", oracle_bound: bool = True,
           check: bool = False) -> ReplayResults:
    """``fraglab replay --json``: the trace replayed under each policy (a name with options, e.g.
    ``"pytorch:expandable_segments:True"``; a list for several; ``"all"``). Always a list, one dict per policy."""
    policies = [policy] if isinstance(policy, str) else list(policy)
    if not policies:
        raise ValueError("replay needs a policy")
    out = _fraglab.replay(_core(snapshot), policies, _capacity(capacity), addresses, pools, on_oom, oracle_bound,
                          check)
    results = ReplayResults(out["document"]["results"])
    results.document = out["document"]
    results.notes = out["notes"]
    return results


def fidelity(snapshot: Any, *, policy: str = "pytorch", capacity: Capacity = None,
             address_hints: bool = True) -> Report:
    """``fraglab fidelity --json``: whether the model makes the recording's device calls, call for call
    (``exact``; else ``divergence``)."""
    return _report("fidelity", _fraglab.fidelity(_core(snapshot), policy, _capacity(capacity), address_hints))


def tune(snapshot: Any, *, capacity: Capacity = None, policy: str = "pytorch", space: Sequence[str] = (),
         also: Sequence[str] = (), jobs: int = 0, keep: int = 3) -> Report:
    """``fraglab tune --json``: the PYTORCH_CUDA_ALLOC_CONF with the lowest predicted peak (``best_env``),
    whether it fits ``capacity`` (``fits``) and every setting tried (``ranking``)."""
    return _report("tune", _fraglab.tune(_core(snapshot), _capacity(capacity), policy, list(space), list(also),
                                         int(jobs), int(keep)))


def _probes(probes: Sequence[Tuple[Any, int]]) -> list:
    out = []
    for item in probes:
        try:
            snapshot, batch = item
        except (TypeError, ValueError):
            raise TypeError("a probe is a (snapshot, batch) pair") from None
        out.append((_core(snapshot), int(batch)))
    return out


def diagnose(snapshot: Any, *, capacity: Capacity = None, at: str = "oom", policy: str = "pytorch",
             jobs: int = 0, top: int = 8, search: bool = True,
             probes: Sequence[Tuple[Any, int]] = ()) -> Diagnosis:
    """``fraglab diagnose --json``: at each OOM (or the peak), where the free memory lies, what pins it,
    and the setting that would have served the request (``verdict``). ``capacity`` defaults to the limit
    the recording's OOMs show. ``probes``: (snapshot, batch) pairs of the same program at smaller batches,
    for the largest batch that fits (``verdict["fit"]``)."""
    return Diagnosis(_fraglab.diagnose(_core(snapshot), _capacity(capacity), at, policy, int(jobs), int(top),
                                       bool(search), _probes(probes)))


def diff(a: Any, b: Any, *, policy: str = "pytorch", capacity: Capacity = None) -> Report:
    """``fraglab diff --json``: two runs side by side, and their allocations by call site, size class,
    stream and category, largest difference first."""
    return _report("diff", _fraglab.diff(_core(a), _core(b), policy, _capacity(capacity)))


def fit(probes: Sequence[Tuple[Any, int]], *, capacity: Capacity = None, oom: Any = None,
        settings: Sequence[str] = (), batches: Sequence[int] = (), max_batch: int = 1 << 20, jobs: int = 0,
        search: bool = True) -> Report:
    """``fraglab fit --json``: the largest batch that fits ``capacity`` (or the limit the ``oom``
    snapshot shows) under each allocator setting, from probe snapshots at two or more small batches."""
    oom_core = None if oom is None else _core(oom)
    return _report("fit", _fraglab.fit(_probes(probes), _capacity(capacity), oom_core, list(settings),
                                       [int(b) for b in batches], int(max_batch), int(jobs), bool(search)))


def policies() -> List[str]:
    """The registered policies' names (``fraglab policies``)."""
    return _fraglab.policies()
