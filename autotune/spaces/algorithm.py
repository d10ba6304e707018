"""One way of computing a kernel family: its template, the dtypes it answers, its own tunables and launch plan.

A family (`KernelSpace` with ``algorithms``) offers its algorithms as the values of its ``ALGO`` parameter;
an algorithm's parameters are sampled only when it is proposed. Adding an algorithm is a template, a module
with one `Algorithm` subclass, and an entry in its family's ``algorithms``.

Accuracy belongs to the request, not to the algorithm: an algorithm lists in ``dtypes`` only the problem dtypes
whose tolerance it meets (1×TF32 does not answer float32; 3×TF32 does).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.shape import Shape

if TYPE_CHECKING:
    from autotune.spaces.base import BufferSpec, Config, KernelSpace, Param, Step


def thread_problems(threads: int, device: DeviceInfo) -> list[str]:
    """Why a block of ``threads`` threads cannot run on ``device`` (empty when it can)."""
    if threads > device.max_threads_per_block:
        return [f"{threads} threads per block > device limit {device.max_threads_per_block}"]
    return []


def smem_problems(smem_bytes: int, device: DeviceInfo) -> list[str]:
    """Why a block of ``smem_bytes`` of dynamic shared memory cannot run on ``device`` (empty when it can)."""
    if smem_bytes > device.smem_per_block_optin:
        return [f"{smem_bytes} B of shared memory > device limit {device.smem_per_block_optin} B"]
    return []


class Algorithm(ABC):
    name: ClassVar[str]  # the value of the family's ALGO parameter
    template: ClassVar[str | Path]  # a file of kernel_templates/
    dtypes: ClassVar[tuple[str, ...]]  # problem dtypes it answers at their accuracy
    min_cc: ClassVar[tuple[int, int]] = (0, 0)  # e.g. (8, 0) for mma.sync, (9, 0) for wgmma
    # Newest compute capability it runs on; None: any. Arch-specific code (sm_90a's wgmma) runs on its own
    # capability alone, and a newer device would fail it at compile time rather than as a rejected proposal.
    max_cc: ClassVar[tuple[int, int] | None] = None
    parameters: ClassVar[tuple["Param", ...]]
    default_config: ClassVar["Config"]  # its own parameters only; equal to the template's macro defaults

    def __init__(self, space: "KernelSpace") -> None:
        self.space = space

    @property
    def dtype(self) -> str:
        return self.space.dtype

    def local(self, config: Mapping[str, Any]) -> "Config":
        """The configuration without the family's ALGO."""
        names = {p.name for p in self.parameters}
        return {k: v for k, v in config.items() if k in names}

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        """Why no configuration of this algorithm can work for ``shape`` on ``device`` (None: some may). The search
        leaves such an algorithm out of its proposals. Here: ``min_cc`` and ``max_cc``; an algorithm for a class
        of shapes (GEMV) adds its own condition."""
        if tuple(device.compute_capability) < tuple(self.min_cc):
            need = "%d.%d" % tuple(self.min_cc)
            return f"algorithm {self.name} needs compute capability {need}; {device.name} has {device.cc}"
        if self.max_cc is not None and tuple(device.compute_capability) > tuple(self.max_cc):
            most = "%d.%d" % tuple(self.max_cc)
            return f"algorithm {self.name} runs on compute capability {most} at most; {device.name} has {device.cc}"
        return None

    @abstractmethod
    def constraints(self, config: "Config", shape: Shape, device: DeviceInfo) -> list[str]:
        """Reasons ``config`` cannot work here (the family has checked the domains and `unfit`)."""

    def defines(self, config: "Config") -> dict[str, int | str]:
        """-D defines: its own parameters, and DTYPE (the problem dtype's code, `autotune.dtypes`)."""
        return {**self.local(config), "DTYPE": dtypes.dtype(self.dtype).code}

    @abstractmethod
    def launches(self, config: "Config", shape: Shape, device: DeviceInfo) -> list["Step"]:
        """The launch plan; buffer names are the family's inputs and outputs and this algorithm's workspace."""

    def workspace(self, config: "Config", shape: Shape) -> dict[str, "BufferSpec"]:
        return {}

    def describe(self, config: "Config") -> str:
        return self.name + " " + " ".join(f"{k}={v}" for k, v in self.local(config).items())
