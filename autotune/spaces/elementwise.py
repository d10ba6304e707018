"""Elementwise kernels over 1-D arrays: add (x + y), relu, sigmoid, gelu (template: elementwise.cu).

dtype: float32, float16 or bfloat16 in and out, fp32 arithmetic (half outputs: `_precision.HALF_TOLERANCE`).

Four kernel names share one template; each fixes its OP define. Tunables: block size, vector width, vectors per
thread, grid-stride loop (with its grid size in blocks per SM) or one step per thread, streaming loads/stores.
"""

from __future__ import annotations

import math

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._precision import output_tolerance, widest_vec
from autotune.spaces._vectors import BLOCK, ITEMS, VectorSpace, block_problems, vector_problems
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step

BLOCKS_PER_SM = (1, 2, 4, 8, 16, 32)


class _Elementwise(VectorSpace):
    template = "elementwise.cu"

    parameters = (
        BLOCK,
        Param("VEC", (1, 2, 4, 8), "elements per load, 16 B at most (scalar fall-back where a pointer is not aligned)"),
        ITEMS,
        Param("GRID_STRIDE", (0, 1), "1: a fixed grid strides over the data; 0: one step per thread"),
        Param("BLOCKS_PER_SM", BLOCKS_PER_SM, "grid of the grid-stride loop, in blocks per SM"),
        Param("STREAM", (0, 1), "streaming loads/stores (__ldcs/__stcs)"),
    )
    default_config = {"BLOCK": 256, "VEC": 4, "ITEMS": 1, "GRID_STRIDE": 0, "BLOCKS_PER_SM": 1, "STREAM": 0}

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        problems = []
        if not config["GRID_STRIDE"] and config["BLOCKS_PER_SM"] != BLOCKS_PER_SM[0]:
            problems.append("BLOCKS_PER_SM only matters with GRID_STRIDE=1")
        return problems + block_problems(config["BLOCK"], device) + vector_problems(config["VEC"], self.dtype)

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """16-byte vectors, two per thread per step where the array is large (more loads in flight)."""
        (n,) = shape
        vec = widest_vec(self.dtype, 1 << 10, self.domain("VEC"))  # pointers are checked at run time
        return {**self.default_config, "VEC": vec, "ITEMS": 2 if n >= (1 << 22) else 1}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        (n,) = shape
        blocks = max(1, self.blocks_needed(config, n))
        if config["GRID_STRIDE"]:
            blocks = min(blocks, config["BLOCKS_PER_SM"] * device.multiprocessors)
        y = "y" if self.arity == 2 else "x"
        return [Launch("elementwise", (blocks, 1, 1), (config["BLOCK"], 1, 1), 0, ("x", y, "out", np.int64(n)))]

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        # Normal, so that relu/sigmoid/gelu see both signs and their interesting region.
        return {name: dtypes.encode(rng.standard_normal(spec.shape) * 2, self.dtype)
                for name, spec in self.input_specs(shape).items()}  # fmt: skip

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"out": BufferSpec(shape, self.dtype)}

    def tolerance(self, output: str, shape: Shape) -> float:
        return output_tolerance(self.dtype, 1e-5)

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1,), (7,), (1_000_003,)]

    def work(self, shape: Shape) -> float:
        return dtypes.dtype(self.dtype).itemsize * float(shape[0]) * (self.arity + 1)


class AddSpace(_Elementwise):
    name = "add"
    op = 0
    arity = 2

    def reference(self, inputs, shape):
        return {"out": inputs["x"].astype(np.float64) + inputs["y"].astype(np.float64)}


class ReluSpace(_Elementwise):
    name = "relu"
    op = 1

    def reference(self, inputs, shape):
        return {"out": np.maximum(inputs["x"].astype(np.float64), 0.0)}


class SigmoidSpace(_Elementwise):
    name = "sigmoid"
    op = 2

    def reference(self, inputs, shape):
        return {"out": 1.0 / (1.0 + np.exp(-inputs["x"].astype(np.float64)))}


class GeluSpace(_Elementwise):
    name = "gelu"
    op = 3

    def reference(self, inputs, shape):
        x = inputs["x"].astype(np.float64)
        return {"out": 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))}


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64: scipy's where installed (fast), else math.erf element by element."""
    try:
        from scipy.special import erf
    except ImportError:
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    return erf(x)
