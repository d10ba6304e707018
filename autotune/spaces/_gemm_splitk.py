"""Split-K for the GEMM family's algorithms: the fp32 partial workspace and the reduce launch that sums it
(kernel_templates/gemm_splitk.cuh, included by each template that splits K).

An algorithm that splits K into S slices launches its main kernel with S as the grid's z dimension, pointing
its output at ``partial`` (S×M×N fp32), then `reduce_launch` sums the slices in a fixed order into C (in the
problem's dtype): deterministic, and fp32 however the output is stored.

`SplitKTiles` is the launch plan and workspace of a tiled algorithm whose grid is its BM×BN output tiles (SIMT,
3×TF32, mma): the main kernel over the tiles and K slices, then the reduce where K is split.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import BufferSpec, Config, Launch, Step, ceil_div

PARTIAL = "partial"  # the workspace buffer's name in launch plans
REDUCE_THREADS = 256  # the header's default
MAX_PARTIAL_BYTES = 1 << 30  # past this a split costs more memory traffic than it can win back


def partial_spec(splits: int, m: int, n: int) -> BufferSpec:
    return BufferSpec((splits, m, n), "float32")


def partial_bytes(splits: int, m: int, n: int) -> int:
    return 4 * splits * m * n


def reduce_launch(splits: int, m: int, n: int, device: DeviceInfo, output: str = "C") -> Launch:
    """Sum ``partial`` [splits][m][n] into ``output``: a grid-stride loop, a few blocks per SM."""
    mn = m * n
    blocks = max(1, min(ceil_div(mn, REDUCE_THREADS), 8 * device.multiprocessors))
    return Launch(
        kernel="gemm_splitk_reduce",
        grid=(blocks, 1, 1),
        block=(REDUCE_THREADS, 1, 1),
        shared_bytes=0,
        args=(PARTIAL, output, np.int64(mn), np.int32(splits)),
    )


def splits_of(config: Mapping[str, Any]) -> int:
    """The configuration's K slices (1 where ``SPLIT_K`` is absent: configurations stored before split-K)."""
    return config.get("SPLIT_K", 1)


def split_workspace(splits: int, m: int, n: int) -> dict[str, BufferSpec]:
    """The workspace of a launch plan that splits K ``splits`` ways: none without a split."""
    return {} if splits == 1 else {PARTIAL: partial_spec(splits, m, n)}


def workspace_problems(splits: int, m: int, n: int) -> list[str]:
    """Why ``splits`` slices of an M×N output cannot be split K (their workspace is too large)."""
    if splits > 1 and partial_bytes(splits, m, n) > MAX_PARTIAL_BYTES:
        return [f"SPLIT_K={splits} needs {partial_bytes(splits, m, n) >> 20} MiB of "
                f"workspace (> {MAX_PARTIAL_BYTES >> 20} MiB)"]  # fmt: skip
    return []


class SplitKTiles(Algorithm):
    """An algorithm whose grid is its BM×BN output tiles, times its K slices along z: ``kernel`` takes
    (A, B, C or the workspace, M, N, K), ``geometry(config)`` gives its ``threads`` and ``smem_bytes``."""

    kernel: ClassVar[str]  # the main kernel's name

    def geometry(self, config: Config) -> dict[str, int]:
        raise NotImplementedError

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n, k = shape
        g = self.geometry(config)
        blocks = ceil_div(m, config["BM"]) * ceil_div(n, config["BN"])
        splits = splits_of(config)
        gemm = Launch(
            kernel=self.kernel,
            grid=(blocks, 1, splits),
            block=(g["threads"], 1, 1),
            shared_bytes=g["smem_bytes"],
            args=("A", "B", "C" if splits == 1 else PARTIAL, np.int32(m), np.int32(n), np.int32(k)),
        )
        return [gemm] if splits == 1 else [gemm, reduce_launch(splits, m, n, device)]

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        return split_workspace(splits_of(config), shape[0], shape[1])
