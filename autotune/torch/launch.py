"""The Python launch path of the operators: torch tensors in, torch tensors out, on torch's current stream. The C++
launcher (`autotune.torch.native`) takes the per-call path where it is available and asks `Launcher.plan` for
each new key; this path runs otherwise.

The first call for a (device, shapes, dtype) builds the plan through `autotune.runtime.dispatch.TunedKernel.prepare`
(configuration chosen, compiled or read from the cache, loaded). Every later call only allocates the outputs and
any workspace through torch's caching allocator and launches: no cudaMalloc, no host synchronisation, so the
call can be captured in a CUDA graph (capture after one warm-up call, as with any lazily compiled kernel).

The per-call path is kept to what a CUDA graph or a loop of small calls can afford (issue 13: at most 3 µs
over a direct `TunedKernel` call): one dict lookup keyed by each tensor's (shape, dtype, device index), one
contiguity test per tensor, `torch.empty` per output, and one cuLaunchKernel with the parameter block built
once. Everything else (device, dtype and shape checks with their torch-style errors) runs on the first call of
a key only: a key that is new goes through `validate`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from autotune.runtime.dispatch import TunedKernel
from autotune.runtime.problem_plan import ProblemPlan
from autotune.runtime.torch_calls import torch_current_stream

_DATABASE: list[str | None] = [None]  # the database the operators read (None: $AUTOTUNE_DB, else the default)
# torch's current stream as an int, without building a torch.cuda.Stream object (what Triton uses).
_RAW_STREAM: Callable[[int], int] = getattr(torch._C, "_cuda_getCurrentRawStream", None) or torch_current_stream


def set_database(db: str | None) -> None:
    """Read tuned configurations from ``db`` (a path or SQLAlchemy URL) in operators first used after this."""
    _DATABASE[0] = db


@dataclass
class _Entry:
    kernel: TunedKernel
    plan: ProblemPlan
    outputs: list[tuple[tuple[int, ...], torch.dtype]]
    workspace: list[int]  # bytes of each workspace buffer, in the plan's order
    device: torch.device
    ordinal: int


class Launcher:
    """One kernel family on every GPU it is used on."""

    def __init__(self, kernel: str, validate: Callable[[Sequence[torch.Tensor]], None] | None = None) -> None:
        self.kernel = kernel
        self.validate = validate  # raises, in torch's style, for tensors the kernel cannot take
        self._tuned: dict[int, TunedKernel] = {}
        self._entries: dict[tuple, _Entry] = {}
        self._lock = threading.Lock()

    def __call__(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        key = []
        for t in tensors:
            if not t.is_contiguous() and self.validate is not None:
                self.validate(tensors)  # raises NotContiguous
            key += (t.shape, t.dtype, t.get_device())  # get_device: -1 on the CPU, so a CPU tensor is a new key
        entry = self._entries.get(tuple(key))
        if entry is None:
            entry = self._prepare(tuple(key), tensors)
        device = entry.device
        results = tuple([torch.empty(shape, dtype=dtype, device=device) for shape, dtype in entry.outputs])
        pointers = [t.data_ptr() for t in (*tensors, *results)]
        # The workspace from torch's caching allocator, freed stream-ordered after the launch: a CUDA graph
        # captures its address like any other intermediate.
        scratch = [torch.empty(nbytes, dtype=torch.uint8, device=device) for nbytes in entry.workspace]
        pointers += [buffer.data_ptr() for buffer in scratch]
        entry.kernel.launch(entry.plan, pointers, _RAW_STREAM(entry.ordinal))
        return results

    def plan(self, *tensors: torch.Tensor) -> ProblemPlan:
        """The plan for calls on tensors like these (checked: raises in torch's style), chosen, compiled and
        loaded on their GPU once."""
        return self.prepared(*tensors)[0]

    def prepared(self, *tensors: torch.Tensor) -> tuple[ProblemPlan, list[tuple[int, ...]]]:
        """`plan`, and the outputs' shapes: the plan's, with the leading dims the inputs' activations came with
        (`KernelSpace.flatten_leading`). What the C++ launcher (`autotune.torch.native`) asks of a new key."""
        if self.validate is not None:
            self.validate(tensors)
        ordinal = tensors[0].device.index or 0
        with self._lock:
            tuned = self._tuned.get(ordinal)
            if tuned is None:
                tuned = self._tuned[ordinal] = TunedKernel(self.kernel, db=_DATABASE[0], device=ordinal)
        space = tuned.space
        flat, leading = space.flatten_leading({n: tuple(t.shape) for n, t in zip(tuned.input_names, tensors)})
        if leading is not None:  # the dispatcher takes the kernel's own ranks: views, once per key
            tensors = [t.view(flat[n]) for n, t in zip(tuned.input_names, tensors)]
        plan = tuned.prepare(*tensors)
        return plan, [space.leading_shape(n, s.shape, leading) for n, s in plan.outputs.items()]

    def _prepare(self, key: tuple, tensors: Sequence[torch.Tensor]) -> _Entry:
        plan, shapes = self.prepared(*tensors)
        ordinal = tensors[0].device.index or 0
        tuned = self._tuned[ordinal]
        outputs = [(shape, getattr(torch, s.dtype)) for shape, s in zip(shapes, plan.outputs.values())]
        workspace = [max(spec.nbytes, 1) for spec in plan.workspace.values()]
        entry = _Entry(tuned, plan, outputs, workspace, tensors[0].device, ordinal)
        self._entries[key] = entry
        return entry

    def tuned(self, ordinal: int = 0) -> TunedKernel | None:
        """The `TunedKernel` behind this operator on GPU ``ordinal``, once it has been called there."""
        return self._tuned.get(ordinal)


def release() -> Any:
    """Forget every plan (for tests that switch databases)."""
    from autotune.runtime import torch_native as native
    from autotune.torch import ops

    for info in ops.OPS.values():
        info.launcher = Launcher(info.kernel, info.launcher.validate)
        native.forget(info.name)
