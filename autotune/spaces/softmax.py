"""Softmax over the rows of a float32, float16 or bfloat16 matrix, in fp32 (template: softmax.cu).

Tunables: those of every row kernel (autotune.spaces._rows) and three-pass vs online (max and sum in one pass).
Inputs hold -inf entries and large values: the kernel must give 0 for -inf and never overflow.
"""

from __future__ import annotations

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._rows import ROW_DEFAULT, ROW_PARAMETERS, RowKernelSpace
from autotune.spaces.base import BufferSpec, Config, Param, Step


class SoftmaxSpace(RowKernelSpace):
    name = "softmax"
    template = "softmax.cu"
    parameters = (*ROW_PARAMETERS, Param("ONLINE", (0, 1), "0: three passes; 1: max and sum in one pass"))
    default_config = {**ROW_DEFAULT, "ONLINE": 0}
    leading_dims = {"x": 2, "y": 2}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        return self.row_launches("softmax", config, shape, ("x", "y", np.int32(rows), np.int32(cols)))

    def split_problems(self, config: Config) -> list[str]:
        return [] if config["ONLINE"] else ["MAPPING=split needs ONLINE=1 (max and sum from one pass)"]

    def rule_extra(self, config: Config, shape: Shape) -> Config:
        # re-reading the row: one pass fewer; a split row: its stats launch makes one pass
        return {"ONLINE": 0 if config["CACHE"] and config["MAPPING"] != "split" else 1}

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"x": self.elem(shape)}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        rows, cols = shape
        x = rng.standard_normal(shape) * 3
        if cols > 1:  # some -inf entries (never a whole row: its softmax is undefined)
            holes = rng.random(shape) < 0.02
            holes[:, 0] = False
            x[holes] = -np.inf
        big = rng.random(shape) < 0.001
        x[big] = rng.uniform(80, 100, size=int(big.sum()))  # exp() would overflow unshifted
        return {"x": dtypes.encode(x, self.dtype)}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"y": self.elem(shape)}

    def reference(self, inputs, shape):
        x = inputs["x"].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return {"y": e / e.sum(axis=1, keepdims=True)}

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        return self.itemsize * 2.0 * rows * cols
