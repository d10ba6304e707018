"""Dot product of two vectors into one fp32 value (template: dot.cu).

dtype: x and y in float32, float16 or bfloat16; products and sums in fp32, the result fp32 (as for `sum`).
Tunables: block size, vector width (16-byte loads of 8 halves), vectors per thread per step, grid size (blocks
per SM), and how blocks combine: atomics into the result, or partials added by a second launch.
Inputs are positive (uniform in [0, 1)): the relative error of the result then measures the kernel, not
cancellation, and the fp32 tolerance grows like the square root of the terms each partial sum holds.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._precision import dtype_code, widest_vec
from autotune.spaces.base import BufferSpec, Config, KernelSpace, Launch, Param, Step, Zero, ceil_div


class DotSpace(KernelSpace):
    name = "dot"
    template = "dot.cu"
    dims = ("n",)
    default_shape = (1 << 24,)
    metric_unit = "GB/s"
    dtypes = dtypes.FLOAT_DTYPES
    parameters = (
        Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
        Param("VEC", (1, 2, 4, 8), "elements per load (16 B at most)"),
        Param("ITEMS", (1, 2, 4, 8), "vectors per thread per step"),
        Param("TWO_PASS", (0, 1), "0: atomics into the result; 1: per-block partials and a second launch"),
        Param("BLOCKS_PER_SM", (1, 2, 4, 8, 16, 32), "grid size, in blocks per SM"),
    )
    default_config = {"BLOCK": 256, "VEC": 4, "ITEMS": 2, "TWO_PASS": 0, "BLOCKS_PER_SM": 4}

    @property
    def itemsize(self) -> int:
        return dtypes.dtype(self.dtype).itemsize

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        problems = []
        if config["BLOCK"] > device.max_threads_per_block:
            problems.append(f"{config['BLOCK']} threads per block > device limit")
        if config["VEC"] * self.itemsize > 16:
            problems.append(f"VEC={config['VEC']} {self.dtype} is {config['VEC'] * self.itemsize} B per access (> 16)")
        return problems

    def defines(self, config: Config) -> dict[str, int | str]:
        out: dict[str, int | str] = {k: v for k, v in config.items() if k != "BLOCKS_PER_SM"}
        out["DTYPE"] = dtype_code(self.dtype)
        return out

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """16-byte vectors, four per thread per step in flight, eight blocks per SM."""
        vec = widest_vec(self.dtype, 1 << 10, self.domain("VEC"))
        return {**self.default_config, "VEC": vec, "ITEMS": 4, "BLOCKS_PER_SM": 8}

    def _grid(self, config: Config, n: int, device: DeviceInfo) -> int:
        needed = ceil_div(max(n // config["VEC"], 1), config["BLOCK"] * config["ITEMS"])
        return max(1, min(needed, config["BLOCKS_PER_SM"] * device.multiprocessors))

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        # Sized for the largest grid any device could use with this config; only `grid` entries are written.
        return {"partials": BufferSpec((config["BLOCKS_PER_SM"] * 1024,))} if config["TWO_PASS"] else {}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        (n,) = shape
        block = (config["BLOCK"], 1, 1)
        grid = self._grid(config, n, device)
        if config["TWO_PASS"]:
            return [
                Launch("dot_main", (grid, 1, 1), block, 0, ("x", "y", np.int64(n), "out", "partials")),
                Launch("dot_final", (1, 1, 1), block, 0, ("partials", np.int32(grid), "out")),
            ]
        return [Zero("out"), Launch("dot_main", (grid, 1, 1), block, 0, ("x", "y", np.int64(n), "out", "out"))]

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"x": BufferSpec(shape, self.dtype), "y": BufferSpec(shape, self.dtype)}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"out": BufferSpec((1,))}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {name: dtypes.encode(rng.uniform(0.0, 1.0, size=shape), self.dtype) for name in ("x", "y")}

    def reference(self, inputs, shape):
        return {"out": np.array([np.dot(np.asarray(inputs["x"], np.float64), np.asarray(inputs["y"], np.float64))])}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        x, y = inputs["x"], inputs["y"]
        if len(x) != 1:
            raise InvalidArgument(f"x must be 1-D (flatten it: x.reshape(-1)), got shape {tuple(x)}")
        if x[0] == 0:
            raise InvalidArgument("x is empty")
        if tuple(y) != tuple(x):
            raise InvalidArgument(f"y has shape {tuple(y)}, x has {tuple(x)}: they must match")
        return (x[0],)

    def tolerance(self, output: str, shape: Shape) -> float:
        # fp32 partial sums of positive terms: rounding grows like the square root of the terms each partial holds.
        return 1e-6 + 4e-8 * math.sqrt(shape[0])

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1,), (7,), (1031,), (1_000_003,)]

    def work(self, shape: Shape) -> float:
        return 2.0 * self.itemsize * shape[0]
