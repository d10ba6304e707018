"""Reductions of a vector to one value: sum and max (template: reduce.cu).

dtype: x in float32, float16 or bfloat16; the result is always one fp32 value, accumulated in fp32 (a half sum
would round away what the fp32 accumulation kept), so the fp32 tolerances hold for every dtype.

Tunables: block size, vector width, vectors per thread per step, warp-shuffle vs shared-memory tree, grid size
(blocks per SM), and how blocks combine: atomics into the result, or partials reduced by a second launch.
"""

from __future__ import annotations

import math
from typing import ClassVar, Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._precision import dtype_code, widest_vec
from autotune.spaces.base import BufferSpec, Config, KernelSpace, Launch, Param, Step, ceil_div


class _Reduce(KernelSpace):
    template = "reduce.cu"
    dims = ("n",)
    default_shape = (1 << 24,)
    metric_unit = "GB/s"
    dtypes = dtypes.FLOAT_DTYPES
    op: ClassVar[int]

    parameters = (
        Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
        Param("VEC", (1, 2, 4, 8), "elements per load (16 B at most)"),
        Param("ITEMS", (1, 2, 4, 8), "vectors per thread per step"),
        Param("TREE", (0, 1), "block reduction: 0 warp shuffles, 1 shared-memory halving tree"),
        Param("TWO_PASS", (0, 1), "0: atomics into the result; 1: per-block partials and a second launch"),
        Param("BLOCKS_PER_SM", (1, 2, 4, 8, 16, 32), "grid size, in blocks per SM"),
    )
    default_config = {"BLOCK": 256, "VEC": 4, "ITEMS": 2, "TREE": 0, "TWO_PASS": 0, "BLOCKS_PER_SM": 4}

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        problems = []
        if config["BLOCK"] > device.max_threads_per_block:
            problems.append(f"{config['BLOCK']} threads per block > device limit")
        itemsize = dtypes.dtype(self.dtype).itemsize
        if config["VEC"] * itemsize > 16:
            problems.append(f"VEC={config['VEC']} {self.dtype} is {config['VEC'] * itemsize} B per access (> 16)")
        return problems

    def defines(self, config: Config) -> dict[str, int | str]:
        out: dict[str, int | str] = {k: v for k, v in config.items() if k != "BLOCKS_PER_SM"}
        out["OP"] = self.op
        out["DTYPE"] = dtype_code(self.dtype)
        return out

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """16-byte vectors; enough blocks to fill every SM several times over, not more than the data needs."""
        vec = widest_vec(self.dtype, 1 << 10, self.domain("VEC"))  # the pointer is checked at run time
        return {**self.default_config, "VEC": vec, "ITEMS": 4, "BLOCKS_PER_SM": 8}

    def _grid(self, config: Config, n: int, device: DeviceInfo) -> int:
        needed = ceil_div(max(n // config["VEC"], 1), config["BLOCK"] * config["ITEMS"])
        return max(1, min(needed, config["BLOCKS_PER_SM"] * device.multiprocessors))

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        # Sized for the largest grid any device could use with this config; only `grid` entries are written.
        if not config["TWO_PASS"]:
            return {}
        return {"partials": BufferSpec((config["BLOCKS_PER_SM"] * 1024,))}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        (n,) = shape
        block = (config["BLOCK"], 1, 1)
        grid = self._grid(config, n, device)
        if config["TWO_PASS"]:
            return [
                Launch("reduce_main", (grid, 1, 1), block, 0, ("x", np.int64(n), "out", "partials")),
                Launch("reduce_final", (1, 1, 1), block, 0, ("partials", np.int32(grid), "out")),
            ]
        return [
            Launch("reduce_init", (1, 1, 1), (1, 1, 1), 0, ("out",)),
            Launch("reduce_main", (grid, 1, 1), block, 0, ("x", np.int64(n), "out", "out")),
        ]

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"x": BufferSpec(shape, self.dtype)}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"out": BufferSpec((1,))}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        x = inputs["x"]
        if len(x) != 1:
            raise InvalidArgument(f"x must be 1-D (flatten it: x.reshape(-1)), got shape {tuple(x)}")
        if x[0] == 0:
            raise InvalidArgument("x is empty")
        return (x[0],)

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1,), (7,), (1031,), (1_000_003,)]

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

    def tolerance(self, output: str, shape: Shape) -> float:
        # fp32 partial sums: rounding grows like the square root of the terms each partial accumulates.
        return 1e-6 + 4e-8 * math.sqrt(shape[0])


class MaxSpace(_Reduce):
    name = "max"
    op = 1

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": dtypes.encode(rng.standard_normal(shape), self.dtype)}

    def reference(self, inputs, shape):
        return {"out": np.array([float(inputs["x"].max())])}

    def tolerance(self, output: str, shape: Shape) -> float:
        return 1e-7  # exact: the maximum is one of the inputs
