"""The launch path of the operators: torch tensors in, torch tensors out, on torch's current stream.

The first call for a (device, shapes, dtype) builds the plan through `autotune.dispatch.TunedKernel.prepare`
(configuration chosen, compiled or read from the cache, loaded). Every later call only allocates the outputs and
any workspace through torch's caching allocator and launches: no cudaMalloc, no host synchronisation, so the
call can be captured in a CUDA graph (capture after one warm-up call, as with any lazily compiled kernel).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from autotune.dispatch import TunedKernel, _Plan, _torch_current_stream

_DATABASE: list[str | None] = [None]  # the database the operators read (None: $AUTOTUNE_DB, else the default)


def set_database(db: str | None) -> None:
    """Read tuned configurations from ``db`` (a path or SQLAlchemy URL) in operators first used after this."""
    _DATABASE[0] = db


@dataclass
class _Entry:
    kernel: TunedKernel
    plan: _Plan
    outputs: list[tuple[tuple[int, ...], torch.dtype]]
    workspace: list[tuple[str, int]]  # name, bytes
    names: tuple[str, ...]  # inputs then outputs, the order pointers are listed in


class Launcher:
    """One kernel family on every GPU it is used on."""

    def __init__(self, kernel: str, validate: Callable[[Sequence[torch.Tensor]], None] | None = None) -> None:
        self.kernel = kernel
        self.validate = validate  # raises, in torch's style, for tensors the kernel cannot take
        self._tuned: dict[int, TunedKernel] = {}
        self._entries: dict[tuple, _Entry] = {}
        self._lock = threading.Lock()

    def __call__(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        device = tensors[0].device
        key = (device.index, *[t.shape for t in tensors], *[t.dtype for t in tensors])
        entry = self._entries.get(key)
        if entry is None:
            entry = self._prepare(key, tensors)
        results = tuple(torch.empty(shape, dtype=dtype, device=device) for shape, dtype in entry.outputs)
        pointers = dict(zip(entry.names, [t.data_ptr() for t in (*tensors, *results)]))
        scratch = []
        for name, nbytes in entry.workspace:
            buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)  # freed stream-ordered after the launch
            scratch.append(buffer)
            pointers[name] = buffer.data_ptr()
        entry.kernel.launch(entry.plan, pointers, _torch_current_stream(device.index))
        return results

    def _prepare(self, key: tuple, tensors: Sequence[torch.Tensor]) -> _Entry:
        if self.validate is not None:
            self.validate(tensors)
        ordinal = tensors[0].device.index or 0
        with self._lock:
            tuned = self._tuned.get(ordinal)
            if tuned is None:
                tuned = self._tuned[ordinal] = TunedKernel(self.kernel, db=_DATABASE[0], device=ordinal)
        plan = tuned.prepare(*tensors)
        outputs = [(tuple(s.shape), getattr(torch, s.dtype)) for s in plan.outputs.values()]
        workspace = [(name, max(spec.nbytes, 1)) for name, spec in plan.workspace.items()]
        entry = _Entry(tuned, plan, outputs, workspace, (*tuned.input_names, *plan.outputs))
        self._entries[key] = entry
        return entry

    def tuned(self, ordinal: int = 0) -> TunedKernel | None:
        """The `TunedKernel` behind this operator on GPU ``ordinal``, once it has been called there."""
        return self._tuned.get(ordinal)


def release() -> Any:
    """Forget every plan (for tests that switch databases)."""
    from autotune.torch import ops

    for info in ops.OPS.values():
        info.launcher = Launcher(info.kernel, info.launcher.validate)
