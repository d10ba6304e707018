"""GEMV as a GEMM algorithm: C = A·B where M == 1 or N == 1, every dtype, fp32 accumulation (template:
kernel_templates/gemm_gemv.cu).

Batch-1 inference multiplies one row by a matrix (M = 1) or a matrix by one column (N = 1); a GEMM tile leaves
all but one of its rows idle there, while these kernels stream the matrix operand once. The algorithm is valid
only for such shapes (its constraints say so), so a search at a square shape never measures it and the
dispatcher's rule default picks it for 1-row and 1-column problems.

N == 1 (and 1×1): ``gemv_rows``, KTHREADS threads per row of A. Otherwise (M == 1): ``gemv_cols``, VEC columns
of B per thread and KTHREADS thread rows along K. ``SPLIT_K`` slices K over the grid's y dimension into an fp32
workspace summed by the family's reduce kernel (`autotune.spaces._gemm_splitk`): one row of 4096 outputs has
too few independent sums to fill the GPU otherwise.
"""

from __future__ import annotations

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._gemm_splitk import MAX_PARTIAL_BYTES, PARTIAL, partial_bytes, reduce_launch, split_workspace
from autotune.spaces.algorithm import Algorithm, thread_problems
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step, ceil_div

MAX_VECTOR_BYTES = 16


def applies(shape: Shape) -> bool:
    """Whether a GEMM of ``shape`` (M, N, K) is a GEMV."""
    return shape[0] == 1 or shape[1] == 1


class GemvGemm(Algorithm):
    name = "gemv"
    template = "gemm_gemv.cu"
    dtypes = ("float32", "float16", "bfloat16")

    parameters = (
        Param("BLOCK", (64, 128, 256, 512), "threads per block"),
        Param("KTHREADS", (1, 2, 4, 8, 16, 32, 64, 128, 256), "threads sharing one output's K loop"),
        Param("VEC", (1, 2, 4, 8), "elements per load (at most 16 bytes)"),
        Param("UNROLL", (1, 2, 4), "independent loads in flight per thread"),
        Param("STREAM", (0, 1), "read the matrix operand with evict-first loads"),
        Param("SPLIT_K", (1, 2, 4, 8, 16, 32), "K slices over the grid (fp32 workspace + reduce); launch only"),
    )
    default_config = {"BLOCK": 256, "KTHREADS": 32, "VEC": 4, "UNROLL": 2, "STREAM": 0, "SPLIT_K": 1}
    LAUNCH_ONLY = ("SPLIT_K",)

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        if not applies(shape):
            return f"gemv computes only M = 1 or N = 1, not {shape[0]}x{shape[1]}"
        return super().unfit(shape, device)

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        c = self.local(config)
        problems = []
        if c["KTHREADS"] > c["BLOCK"]:
            problems.append(f"KTHREADS={c['KTHREADS']} threads do not fit a block of {c['BLOCK']}")
        itemsize = dtypes.dtype(self.dtype).itemsize
        if c["VEC"] * itemsize > MAX_VECTOR_BYTES:
            problems.append(f"VEC={c['VEC']} {self.dtype} elements are more than a 16-byte load")
        problems += thread_problems(c["BLOCK"], device)
        splits = c["SPLIT_K"]
        if splits > 1 and partial_bytes(splits, shape[0], shape[1]) > MAX_PARTIAL_BYTES:
            problems.append(f"SPLIT_K={splits} needs more than {MAX_PARTIAL_BYTES >> 20} MiB of workspace")
        return problems

    def defines(self, config: Config) -> dict[str, int | str]:
        return {k: v for k, v in super().defines(config).items() if k not in self.LAUNCH_ONLY}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n, k = shape
        c = self.local(config)
        splits = c["SPLIT_K"]
        if n == 1:
            kernel, blocks = "gemv_rows", ceil_div(m, c["BLOCK"] // c["KTHREADS"])
        else:
            kernel, blocks = "gemv_cols", ceil_div(n, c["BLOCK"] // c["KTHREADS"] * c["VEC"])
        out = "C" if splits == 1 else PARTIAL
        # The kernels take C and the fp32 workspace; without a split the workspace pointer is unused (C again).
        gemv = Launch(kernel, (blocks, splits, 1), (c["BLOCK"], 1, 1), 0,
                      ("A", "B", "C", out, np.int32(m), np.int32(n), np.int32(k)))  # fmt: skip
        return [gemv] if splits == 1 else [gemv, reduce_launch(splits, m, n, device)]

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        return split_workspace(self.local(config)["SPLIT_K"], shape[0], shape[1])

    def describe(self, config: Config) -> str:
        c = self.local(config)
        text = f"gemv block {c['BLOCK']} k{c['KTHREADS']} vec{c['VEC']} x{c['UNROLL']}"
        text += " stream" if c["STREAM"] else ""
        return text + (f" splitk{c['SPLIT_K']}" if c["SPLIT_K"] > 1 else "")
