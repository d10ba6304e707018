"""RMSNorm forward over the rows of a matrix: y = x * rsqrt(mean(x^2) + eps) * w (template: rmsnorm.cu).

x and y in float32, float16 or bfloat16, w in the same dtype (``rmsnorm``) or in fp32 with half x
(``rmsnorm_mixed``); fp32 arithmetic. Tunables: those of every row kernel (autotune.spaces._rows).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._rows import ROW_DEFAULT, ROW_PARAMETERS, RowKernelSpace
from autotune.spaces.base import BufferSpec, Config, Step

EPS = 1e-6


class RmsNormSpace(RowKernelSpace):
    name = "rmsnorm"
    template = "rmsnorm.cu"
    parameters = ROW_PARAMETERS
    default_config = dict(ROW_DEFAULT)
    mixed_variant = "rmsnorm_mixed"
    leading_dims = {"x": 2, "y": 2}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        args = ("x", "weight", "y", np.int32(rows), np.int32(cols), np.float32(EPS))
        return self.row_launches("rmsnorm", config, shape, args)

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"x": self.elem(shape), "weight": self.weight(shape[1])}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {
            "x": dtypes.encode(rng.standard_normal(shape), self.dtype),
            "weight": dtypes.encode(rng.uniform(0.5, 1.5, shape[1]), self.wdtype),
        }

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        shape = super().infer_shape(inputs)
        if tuple(inputs["weight"]) != (shape[1],):
            raise InvalidArgument(f"weight has shape {tuple(inputs['weight'])}, x has {shape[1]} columns")
        return shape

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"y": self.elem(shape)}

    def reference(self, inputs, shape):
        x = inputs["x"].astype(np.float64)
        rstd = 1.0 / np.sqrt((x * x).mean(axis=1) + EPS)
        return {"y": x * rstd[:, None] * inputs["weight"].astype(np.float64)}

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        return self.itemsize * 2.0 * rows * cols + dtypes.dtype(self.wdtype).itemsize * cols


class RmsNormMixedSpace(RmsNormSpace):
    """RMSNorm of half x with fp32 weights (mixed-precision training)."""

    name = "rmsnorm_mixed"
    dtypes = ("float16", "bfloat16")
    weight_dtype = "float32"
    mixed_variant = ""
