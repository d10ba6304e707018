"""GEMV, y = A·x with A row-major M×N (template: gemv.cu); the name is historical.

dtype: A, x and y in float32, float16 or bfloat16; products summed in fp32 (half y: `_precision.HALF_TOLERANCE`).

Tunables: threads per row (sub-warp 4/8/16, a warp, or several warps), block size, vector width, independent
accumulators per thread, streaming loads of A.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._precision import dtype_code, output_tolerance, widest_vec
from autotune.spaces._vectors import BLOCK, VEC, access_problems
from autotune.spaces.base import BufferSpec, Config, KernelSpace, Launch, Param, Step, ceil_div


class SgemvSpace(KernelSpace):
    name = "sgemv"
    template = "gemv.cu"
    dims = ("M", "N")
    default_shape = (4096, 4096)
    metric_unit = "GB/s"
    dtypes = dtypes.FLOAT_DTYPES
    parameters = (
        BLOCK,
        Param("TPR", (4, 8, 16, 32, 64, 128, 256), "threads per row: sub-warp, a warp, or several warps"),
        VEC,
        Param("ACCS", (1, 2, 4), "independent accumulators per thread (loads in flight)"),
        Param("STREAM_A", (0, 1), "read A with streaming loads (__ldcs)"),
    )
    default_config = {"BLOCK": 256, "TPR": 32, "VEC": 4, "ACCS": 2, "STREAM_A": 0}

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        problems = []
        if config["TPR"] > config["BLOCK"]:
            problems.append(f"{config['TPR']} threads per row do not fit a block of {config['BLOCK']}")
        return problems + access_problems(config, self.dtype, device)

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**config, "DTYPE": dtype_code(self.dtype)}

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """The widest vector N keeps aligned; threads per row from the row length (a few vectors per thread, at
        least a quarter warp); rows per block so that short matrices still spread over the SMs."""
        m, n = shape
        vec = widest_vec(self.dtype, n, self.domain("VEC"))
        tpr = 4
        while tpr < 256 and tpr * vec * 8 < n:
            tpr *= 2
        block = max(tpr, 256)
        while block > max(tpr, 64) and ceil_div(m, block // tpr) < 2 * device.multiprocessors:
            block //= 2
        return {**self.default_config, "VEC": vec, "TPR": tpr, "BLOCK": block}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n = shape
        grid = (ceil_div(m, config["BLOCK"] // config["TPR"]), 1, 1)
        return [Launch("sgemv", grid, (config["BLOCK"], 1, 1), 0, ("A", "x", "y", np.int32(m), np.int32(n)))]

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        m, n = shape
        return {"A": BufferSpec((m, n), self.dtype), "x": BufferSpec((n,), self.dtype)}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        a, x = inputs["A"], inputs["x"]
        if len(a) != 2 or 0 in a:
            raise InvalidArgument(f"A must be a non-empty 2-D matrix, got shape {tuple(a)}")
        if tuple(x) != (a[1],):
            raise InvalidArgument(f"x has shape {tuple(x)} but A has {a[1]} columns: y = A·x needs x of ({a[1]},)")
        return (a[0], a[1])

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"y": BufferSpec((shape[0],), self.dtype)}

    def reference(self, inputs, shape):
        return {"y": inputs["A"].astype(np.float64) @ inputs["x"].astype(np.float64)}

    def tolerance(self, output: str, shape: Shape) -> float:
        return output_tolerance(self.dtype, 1e-5)

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1, 1), (7, 1), (1, 65539), (33, 1031), (1000, 77), (3, shape[1])]

    def work(self, shape: Shape) -> float:
        m, n = shape
        return dtypes.dtype(self.dtype).itemsize * float(m * n + n + m)
