"""SGEMV, y = A·x in fp32 with A row-major M×N (template: gemv.cu).

Tunables: threads per row (sub-warp 4/8/16, a warp, or several warps), block size, vector width, independent
accumulators per thread, streaming loads of A.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces.base import BufferSpec, Config, KernelSpace, Launch, Param, Step, ceil_div


class SgemvSpace(KernelSpace):
    name = "sgemv"
    template = "gemv.cu"
    dims = ("M", "N")
    default_shape = (4096, 4096)
    metric_unit = "GB/s"
    parameters = (
        Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
        Param("TPR", (4, 8, 16, 32, 64, 128, 256), "threads per row: sub-warp, a warp, or several warps"),
        Param("VEC", (1, 2, 4), "floats per load"),
        Param("ACCS", (1, 2, 4), "independent accumulators per thread (loads in flight)"),
        Param("STREAM_A", (0, 1), "read A with streaming loads (__ldcs)"),
    )
    default_config = {"BLOCK": 256, "TPR": 32, "VEC": 4, "ACCS": 2, "STREAM_A": 0}

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        problems = []
        if config["TPR"] > config["BLOCK"]:
            problems.append(f"{config['TPR']} threads per row do not fit a block of {config['BLOCK']}")
        if config["BLOCK"] > device.max_threads_per_block:
            problems.append(f"{config['BLOCK']} threads per block > device limit")
        return problems

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n = shape
        grid = (ceil_div(m, config["BLOCK"] // config["TPR"]), 1, 1)
        return [Launch("sgemv", grid, (config["BLOCK"], 1, 1), 0, ("A", "x", "y", np.int32(m), np.int32(n)))]

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        m, n = shape
        return {"A": BufferSpec((m, n)), "x": BufferSpec((n,))}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        a, x = inputs["A"], inputs["x"]
        if len(a) != 2 or 0 in a:
            raise InvalidArgument(f"A must be a non-empty 2-D matrix, got shape {tuple(a)}")
        if tuple(x) != (a[1],):
            raise InvalidArgument(f"x has shape {tuple(x)} but A has {a[1]} columns: y = A·x needs x of ({a[1]},)")
        return (a[0], a[1])

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"y": BufferSpec((shape[0],))}

    def reference(self, inputs, shape):
        return {"y": inputs["A"].astype(np.float64) @ inputs["x"].astype(np.float64)}

    def tolerance(self, output: str, shape: Shape) -> float:
        return 1e-5

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1, 1), (7, 1), (1, 65539), (33, 1031), (1000, 77), (3, shape[1])]

    def work(self, shape: Shape) -> float:
        m, n = shape
        return 4.0 * (m * n + n + m)
