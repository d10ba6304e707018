"""Reductions of a vector to one value: sum and max (template: reduce.cu).

dtype: x in float32, float16 or bfloat16; the result is always one fp32 value, accumulated in fp32 (a half sum
would round away what the fp32 accumulation kept), so the fp32 tolerances hold for every dtype.

Tunables: block size, vector width, vectors per thread per step, warp-shuffle vs shared-memory tree, grid size
(blocks per SM), and how blocks combine: atomics into the result, or partials reduced by a second launch.
"""

from __future__ import annotations

import numpy as np

from autotune import dtypes
from autotune.shape import Shape
from autotune.spaces._vectors import BLOCK, BLOCKS_PER_SM, ITEMS, TWO_PASS, VEC, TwoPassSpace
from autotune.spaces.base import Launch, Param, Step


class _Reduce(TwoPassSpace):
    template = "reduce.cu"
    kernels = "reduce"

    parameters = (
        BLOCK,
        VEC,
        ITEMS,
        Param("TREE", (0, 1), "block reduction: 0 warp shuffles, 1 shared-memory halving tree"),
        TWO_PASS,
        BLOCKS_PER_SM,
    )
    default_config = {"BLOCK": 256, "VEC": 4, "ITEMS": 2, "TREE": 0, "TWO_PASS": 0, "BLOCKS_PER_SM": 4}

    def init_steps(self) -> list[Step]:
        return [Launch("reduce_init", (1, 1, 1), (1, 1, 1), 0, ("out",))]  # max starts from -inf, not zero

    def work(self, shape: Shape) -> float:
        return dtypes.dtype(self.dtype).itemsize * float(shape[0])


class SumSpace(_Reduce):
    name = "sum"
    op = 0

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        # Positive terms: the relative error of the sum then measures the kernel, not cancellation.
        return {"x": dtypes.encode(rng.uniform(0.0, 1.0, size=shape), self.dtype)}

    def reference(self, inputs, shape):
        return {"out": np.array([inputs["x"].astype(np.float64).sum()])}


class MaxSpace(_Reduce):
    name = "max"
    op = 1

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": dtypes.encode(rng.standard_normal(shape), self.dtype)}

    def reference(self, inputs, shape):
        return {"out": np.array([float(inputs["x"].max())])}

    def tolerance(self, output: str, shape: Shape) -> float:
        return 1e-7  # exact: the maximum is one of the inputs
