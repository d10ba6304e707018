"""What runs for one problem (kernel, shape, dtype) at run time: the chosen configuration with its launches bound,
and its workspace, allocated once per stream where the caller brings none."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from autotune.runtime import call_log
from autotune.runtime.cuda_driver import Driver
from autotune.runtime.launch_plan import LaunchPlan
from autotune.runtime.selection import Choice
from autotune.shape import Shape
from autotune.spaces.base import BufferSpec


@dataclass
class ProblemPlan:
    """What runs for one problem (shape, dtype): the chosen configuration and its bound launches.

    Pointers are given in the order of ``names``: the inputs, the outputs, then the workspace buffers; a
    caller that allocates no workspace (a plain call) leaves them out, and the plan allocates its own once per
    stream."""

    shape: Shape
    dtype: str
    choice: Choice
    launches: LaunchPlan
    outputs: dict[str, BufferSpec]
    workspace: dict[str, BufferSpec]
    kernel: str = ""  # as `autotune.record` names it
    lock: threading.Lock = field(default_factory=threading.Lock)
    scratch: dict[int, list[int]] = field(default_factory=dict)  # stream → workspace pointers

    @property
    def names(self) -> tuple[str, ...]:
        return self.launches.names

    def launch(self, driver: Driver, pointers: Sequence[int], stream: int) -> None:
        """Run on ``pointers`` (see the class) on ``stream``."""
        if call_log.ACTIVE:
            call_log.note(self.kernel, self.shape, self.dtype)
        if len(pointers) < len(self.launches.names):
            pointers = [*pointers, *self._scratch(driver, stream)]
        self.launches.launch(pointers, stream)

    def run(self, driver: Driver, pointers: Mapping[str, int], stream: int) -> None:
        """`launch` with pointers by name (the workspace's may be left out)."""
        given = [pointers[n] for n in self.launches.names if n not in self.workspace]
        if self.workspace and all(n in pointers for n in self.workspace):
            given += [pointers[n] for n in self.workspace]
        self.launch(driver, given, stream)

    def _scratch(self, driver: Driver, stream: int) -> list[int]:
        with self.lock:
            found = self.scratch.get(stream)
            if found is None:
                found = self.scratch[stream] = [driver.alloc(s.nbytes) for s in self.workspace.values()]
            return found
