"""Softmax backward over the rows of a matrix: dx = y * (dy - Σ dy·y), from the forward's output y and the output
gradient dy, in float32, float16 or bfloat16 (fp32 arithmetic; template: softmax_backward.cu).

Tunables: those of every row kernel (autotune.spaces._rows) but the shared-memory cache: both rows stay in registers
(CACHE=1, twice the registers of a forward row) or are read again (CACHE=0). Few long rows split over blocks as the
forward's do, the split's stats launch summing dy·y.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._rows import ROW_DEFAULT, ROW_PARAMETERS, RowKernelSpace
from autotune.spaces.base import BufferSpec, Config, Param, Step

CACHE = Param("CACHE", (0, 1), "keep y and dy in registers between the dot product and the write (1), or read them "
              "again (0)")  # fmt: skip


class SoftmaxBackwardSpace(RowKernelSpace):
    name = "softmax_backward"
    template = "softmax_backward.cu"
    parameters = tuple(CACHE if p.name == "CACHE" else p for p in ROW_PARAMETERS)
    default_config = dict(ROW_DEFAULT)
    cached_rows = 2
    split_inputs = ("y", "dy")
    leading_dims = {"y": 2, "dy": 2, "dx": 2}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        return self.row_launches("softmax_backward", config, shape, ("y", "dy", "dx", np.int32(rows), np.int32(cols)))

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        shape = super().infer_shape({"x": inputs["y"]})
        if tuple(inputs["dy"]) != tuple(inputs["y"]):
            raise InvalidArgument(f"dy has shape {tuple(inputs['dy'])}, y has {tuple(inputs['y'])}")
        return shape

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"y": self.elem(shape), "dy": self.elem(shape)}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """y a softmax (rows of positive values summing to 1, some exactly 0 where the forward had -inf) and dy of
        mixed signs."""
        x = rng.standard_normal(shape) * 3
        if shape[1] > 1:
            x[rng.random(shape) < 0.02] = -np.inf
            x[:, 0] = np.maximum(x[:, 0], 0.0)  # never a whole row of -inf
        e = np.exp(x - x.max(axis=1, keepdims=True))
        y = e / e.sum(axis=1, keepdims=True)
        return {"y": dtypes.encode(y, self.dtype), "dy": dtypes.encode(rng.standard_normal(shape), self.dtype)}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"dx": self.elem(shape)}

    def reference(self, inputs, shape):
        y, dy = inputs["y"].astype(np.float64), inputs["dy"].astype(np.float64)
        return {"dx": y * (dy - (dy * y).sum(axis=1, keepdims=True))}

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        return self.itemsize * 3.0 * rows * cols
