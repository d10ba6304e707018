"""The space of vector_add.cu: what autotune may vary, what is valid, how to launch it and what is right.

    autotune search ./my_space.py:MySpace --shape 16777216 --trials 40
    autotune best ./my_space.py:MySpace
    add = autotune.load("./my_space.py:MySpace"); c = add(a, b)   # a, b: float32 CUDA tensors or numpy arrays

``template`` is relative, so it names the file beside this one (a name found nowhere beside it is looked up in
the library's kernel_templates/). Every name below that the search, the validation or the dispatcher needs is
checked when the space is loaded: a missing one is named in the error.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.spaces import BufferSpec, Config, KernelSpace, Launch, Param
from autotune.spaces.base import ceil_div


class MySpace(KernelSpace):
    name = "vector_add"
    template = "vector_add.cu"
    dims = ("N",)
    default_shape = (1 << 24,)
    metric_unit = "GB/s"
    parameters = (
        Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
        Param("VEC", (1, 2, 4), "floats per load and store"),
        Param("UNROLL", (1, 2, 4, 8), "vectors per thread"),
    )
    default_config = {"BLOCK": 256, "VEC": 4, "UNROLL": 1}  # the template's macro defaults

    def constraints(self, config: Config, shape, device: DeviceInfo) -> list[str]:
        """Why a configuration cannot run (empty: it can). Rejected configurations are never compiled."""
        if config["BLOCK"] > device.max_threads_per_block:
            return [f"{config['BLOCK']} threads per block > the device's {device.max_threads_per_block}"]
        return []

    def launches(self, config: Config, shape, device: DeviceInfo) -> list[Launch]:
        (n,) = shape
        per_block = config["BLOCK"] * config["VEC"] * config["UNROLL"]
        return [Launch("vector_add", (ceil_div(n, per_block), 1, 1), (config["BLOCK"], 1, 1), 0,
                       ("A", "B", "C", np.int64(n)))]  # fmt: skip

    def input_specs(self, shape) -> dict[str, BufferSpec]:
        return {"A": BufferSpec(shape), "B": BufferSpec(shape)}

    def outputs(self, shape) -> dict[str, BufferSpec]:
        return {"C": BufferSpec(shape)}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
        """The problem shape from the caller's arrays (for autotune.load); name the argument that is wrong."""
        a, b = tuple(inputs["A"]), tuple(inputs["B"])
        if len(a) != 1 or a[0] == 0:
            raise InvalidArgument(f"A must be a non-empty 1-D array, got shape {a}")
        if b != a:
            raise InvalidArgument(f"B has shape {b}, A has {a}")
        return a

    def reference(self, inputs, shape) -> dict[str, np.ndarray]:
        return {"C": inputs["A"].astype(np.float64) + inputs["B"]}

    def tolerance(self, output: str, shape) -> float:
        return 1e-6  # one fp32 rounding per element: relative error ≤ 2^-24

    def validation_shapes(self, shape) -> list[tuple[int, ...]]:
        return [(1,), (7,), (1_000_003,), shape]  # ragged ends: no multiple of any VEC or BLOCK

    def work(self, shape) -> float:
        return 12.0 * shape[0]  # bytes moved: read A and B, write C
