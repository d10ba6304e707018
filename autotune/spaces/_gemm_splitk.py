"""Split-K for the GEMM family's algorithms: the fp32 partial workspace and the reduce launch that sums it
(kernel_templates/gemm_splitk.cuh, included by each template that splits K).

An algorithm that splits K into S slices launches its main kernel with S as the grid's z dimension, pointing
its output at ``partial`` (S×M×N fp32), then `reduce_launch` sums the slices in a fixed order into C (in the
problem's dtype): deterministic, and fp32 however the output is stored.
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.spaces.base import BufferSpec, Launch, ceil_div

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
