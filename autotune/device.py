"""What we know about a GPU: its identity (for the store) and its limits (for the space constraints).

`query_device` reads a real device through the CUDA driver (ctypes; nothing to install beyond the driver).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotune.errors import DeviceError


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    l2_bytes: int
    total_memory: int
    max_threads_per_block: int
    smem_per_block: int  # without opting in
    smem_per_block_optin: int  # after cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)
    smem_per_multiprocessor: int
    registers_per_block: int
    registers_per_multiprocessor: int
    driver_version: str  # kernel-module version, e.g. "580.159.04", else the CUDA driver API version
    cuda_driver_api: str  # e.g. "13.0"

    @property
    def arch(self) -> str:
        """nvcc's name for the device's own machine code, e.g. ``sm_90``."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def compile_arch(self) -> str:
        """The architecture kernels are compiled for: the family-specific ``sm_90a`` on Hopper, whose
        ``wgmma`` and ``setmaxnreg`` exist only there (its cubins run on compute capability 9.0 alone, as every
        cubin we build is for the device it runs on)."""
        return self.arch + "a" if self.compute_capability == (9, 0) else self.arch

    @property
    def cc(self) -> str:
        return "%d.%d" % self.compute_capability

    @property
    def slug(self) -> str:
        """The name in a form fit for study names: ``NVIDIA H200`` → ``nvidia-h200``."""
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["compute_capability"] = list(self.compute_capability)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DeviceInfo":
        data = dict(data)
        data["compute_capability"] = tuple(data["compute_capability"])
        return cls(**data)


def _kernel_module_version() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", text)
    return match.group(1) if match else None


def query_device(ordinal: int = 0) -> DeviceInfo:
    """Describe GPU ``ordinal`` through the CUDA driver. Raises `DeviceError` when there is none to describe."""
    from autotune.runtime import cuda_driver as cu

    driver = cu.Driver.get()
    count = driver.device_count()
    if count == 0:
        raise DeviceError("no CUDA GPU on this machine")
    if not 0 <= ordinal < count:
        raise DeviceError(f"no CUDA GPU number {ordinal}: this machine has {count}")
    dev = driver.device(ordinal)

    def attr(a: int) -> int:
        return driver.attribute(dev, a)

    api = driver.driver_version()
    api_text = f"{api // 1000}.{(api % 1000) // 10}"
    return DeviceInfo(
        name=driver.device_name(dev),
        compute_capability=(attr(cu.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                            attr(cu.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),  # fmt: skip
        multiprocessors=attr(cu.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        l2_bytes=attr(cu.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        total_memory=driver.total_memory(dev),
        max_threads_per_block=attr(cu.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        smem_per_block=attr(cu.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
        smem_per_block_optin=attr(cu.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        smem_per_multiprocessor=attr(cu.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        registers_per_block=attr(cu.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
        registers_per_multiprocessor=attr(cu.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
        driver_version=_kernel_module_version() or api_text,
        cuda_driver_api=api_text,
    )


# The compute capability of every CUDA GPU released (NVIDIA's list, as of CUDA 13.0; extend it with each new
# architecture, as _SMEM_LIMITS below): a file naming another one was mistyped or edited, and its rows would never
# match a device.
COMPUTE_CAPABILITIES: frozenset[tuple[int, int]] = frozenset({
    (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1), (3, 0), (3, 2), (3, 5), (3, 7), (5, 0), (5, 2), (5, 3),
    (6, 0), (6, 1), (6, 2), (7, 0), (7, 2), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 1),
    (10, 3), (11, 0), (12, 0), (12, 1),
})  # fmt: skip

# Per-compute-capability limits from the CUDA programming guide's technical specifications: (shared memory per
# multiprocessor, per block after opting in). Threads per block (1024) and registers (64 K per block and per
# multiprocessor) are the same on every architecture autotune builds for.
_SMEM_LIMITS: dict[tuple[int, int], tuple[int, int]] = {
    (7, 0): (98304, 98304),
    (7, 2): (98304, 98304),
    (7, 5): (65536, 65536),
    (8, 0): (167936, 166912),
    (8, 6): (102400, 101376),
    (8, 7): (167936, 166912),
    (8, 9): (102400, 101376),
    (9, 0): (233472, 232448),
    (10, 0): (233472, 232448),
    (10, 3): (233472, 232448),
    (12, 0): (102400, 101376),
    (12, 1): (102400, 101376),
}


def nominal_device(name: str, compute_capability: tuple[int, int]) -> DeviceInfo:
    """A device known only by name and compute capability (an imported file names no more), with the limits
    that capability guarantees: what space constraints need to judge a configuration for it. Its count of
    multiprocessors, L2 and memory are unknown (zero): launch geometry must come from the real device.
    A capability missing from the table takes the nearest older one's limits (the oldest's, below all)."""
    cc = tuple(compute_capability)
    known = sorted(_SMEM_LIMITS)
    older = [k for k in known if k <= cc]
    per_sm, optin = _SMEM_LIMITS[older[-1] if older else known[0]]
    return DeviceInfo(
        name=name,
        compute_capability=(int(cc[0]), int(cc[1])),
        multiprocessors=0,
        l2_bytes=0,
        total_memory=0,
        max_threads_per_block=1024,
        smem_per_block=49152,
        smem_per_block_optin=optin,
        smem_per_multiprocessor=per_sm,
        registers_per_block=65536,
        registers_per_multiprocessor=65536,
        driver_version="",
        cuda_driver_api="",
    )
