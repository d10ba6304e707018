"""Dot product of two vectors into one fp32 value (template: dot.cu).

dtype: x and y in float32, float16 or bfloat16; products and sums in fp32, the result fp32 (as for `sum`).
Tunables: block size, vector width (16-byte loads of 8 halves), vectors per thread per step, grid size (blocks
per SM), and how blocks combine: atomics into the result, or partials added by a second launch.
Inputs are positive (uniform in [0, 1)): the relative error of the result then measures the kernel, not
cancellation, and the fp32 tolerance grows like the square root of the terms each partial sum holds.
"""

from __future__ import annotations

import numpy as np

from autotune import dtypes
from autotune.shape import Shape
from autotune.spaces._vectors import BLOCK, BLOCKS_PER_SM, ITEMS, TWO_PASS, VEC, TwoPassSpace


class DotSpace(TwoPassSpace):
    name = "dot"
    template = "dot.cu"
    kernels = "dot"
    arity = 2
    parameters = (BLOCK, VEC, ITEMS, TWO_PASS, BLOCKS_PER_SM)
    default_config = {"BLOCK": 256, "VEC": 4, "ITEMS": 2, "TWO_PASS": 0, "BLOCKS_PER_SM": 4}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {name: dtypes.encode(rng.uniform(0.0, 1.0, size=shape), self.dtype) for name in ("x", "y")}

    def reference(self, inputs, shape):
        return {"out": np.array([np.dot(np.asarray(inputs["x"], np.float64), np.asarray(inputs["y"], np.float64))])}

    def work(self, shape: Shape) -> float:
        return 2.0 * self.itemsize * shape[0]
