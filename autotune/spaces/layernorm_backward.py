"""LayerNorm backward: dx, dweight, dbias from dy, x, weight and the forward's mean and rstd (RMSNorm's backward,
`autotune.spaces.rmsnorm_backward`, is the same family with RMS=1).

dy, x, dx in float32, float16 or bfloat16; weight, dweight, dbias in the same dtype, or in fp32 with half x
(``layernorm_backward_mixed``); mean, rstd and every sum in fp32.

Algorithms (``ALGO``):

* ``tiles`` (layernorm_backward.cu, `autotune.spaces.layernorm_backward_tiles`): blocks of RPB rows over column
  tiles, split row sums for any width, partials or atomics. The family's first algorithm: its configurations are
  those of the family before it had algorithms.
* ``persistent`` (layernorm_backward_persistent.cu, `autotune.spaces.layernorm_backward_persistent`): a grid of a
  few blocks per SM walking all rows, each row of dy and x read once and kept on chip, dweight/dbias summed in
  registers across a block's rows and written once per block, then a finalize launch (or, FUSE=1, the kernel's last
  blocks to finish add the partial rows up, in the same order: no second launch). Rows up to what its register
  or shared-memory cache holds: 12288 columns of fp32 LayerNorm, 16384 of half LayerNorm and fp32 RMSNorm, 24576 of
  half RMSNorm.

`rule_default`: persistent from as many rows as the device has SMs, where it holds the row; tiles otherwise.
Below one row per SM the persistent grid leaves SMs idle (it never splits a row over blocks), where tiles splits
long rows into column tiles; above it, persistent moves the least there is (dy and x read once, dx written once)
plus one fp32 row of dw (and db) per block, where tiles re-reads dy and x (SPLIT=1) or writes a partial row every
RPB rows, and reduces them with one thread per column.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._rows import RowSpace
from autotune.spaces.base import ALGO, BufferSpec, Config
from autotune.spaces.layernorm import EPS, layernorm_inputs, row_stats
from autotune.spaces.layernorm_backward_persistent import PersistentBackward
from autotune.spaces.layernorm_backward_tiles import TilesBackward

class LayerNormBackwardSpace(RowSpace):
    name = "layernorm_backward"
    mixed_variant = "layernorm_backward_mixed"
    leading_dims = {"dy": 2, "x": 2, "mean": 1, "rstd": 1, "dx": 2}
    rms: ClassVar[bool] = False  # RMSNorm's backward: no mean, no dbias
    algorithms = (TilesBackward, PersistentBackward)

    @classmethod
    def supported_dtypes(cls) -> tuple[str, ...]:
        return tuple(d for d in cls.dtypes if any(d in a.dtypes for a in cls.algorithms))  # _mixed: halves only

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """persistent's rule (`PersistentBackward.rule`) where there are at least as many rows as SMs and it finds
        a valid configuration, else tiles' (`TilesBackward.rule`, the family's rule before persistent existed);
        only algorithms the space offers (a narrowed space keeps its own)."""
        offered = self.domain(ALGO)
        if "persistent" in offered and shape[0] >= device.multiprocessors:
            config = self.algos["persistent"].rule(shape, device)
            if config is not None:
                return config
        if "tiles" in offered:
            return self.algos["tiles"].rule(shape, device)
        return self.algos["persistent"].rule(shape, device) or dict(self.default_config)

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"dy": self.elem(shape), "x": self.elem(shape), "weight": self.weight(cols),
                "mean": BufferSpec((rows,)), "rstd": BufferSpec((rows,))}  # fmt: skip

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        forward = layernorm_inputs(shape, rng, self.dtype, self.wdtype)
        mean, rstd = row_stats(dtypes.decode(forward["x"], self.dtype))  # what the forward hands to the backward
        return {
            "dy": dtypes.encode(rng.standard_normal(shape), self.dtype),
            "x": forward["x"],
            "weight": forward["weight"],
            "mean": mean.astype(np.float32),
            "rstd": rstd.astype(np.float32),
        }

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        dy = inputs["dy"]
        if len(dy) != 2 or 0 in dy:
            raise InvalidArgument(f"dy must be a non-empty 2-D (rows, cols) array, got shape {tuple(dy)}")
        rows, cols = dy
        expected = {"x": (rows, cols), "weight": (cols,), "mean": (rows,), "rstd": (rows,)}
        for name, want in expected.items():
            if name not in inputs:
                continue
            if tuple(inputs[name]) != want:
                raise InvalidArgument(f"{name} has shape {tuple(inputs[name])}, expected {want} for dy {tuple(dy)}")
        return (rows, cols)

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"dx": self.elem(shape), "dweight": self.weight(cols), "dbias": self.weight(cols)}

    def reference(self, inputs, shape):
        dy = inputs["dy"].astype(np.float64)
        mean = inputs["mean"].astype(np.float64)[:, None]
        rstd = inputs["rstd"].astype(np.float64)[:, None]
        xhat = (inputs["x"].astype(np.float64) - mean) * rstd
        g = dy * inputs["weight"].astype(np.float64)
        dx = rstd * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
        return {"dx": dx, "dweight": (dy * xhat).sum(axis=0), "dbias": dy.sum(axis=0)}

    def fp32_tolerance(self, output: str, shape: Shape) -> float:
        return 2e-5

    def zero_tolerance(self, output: str, shape: Shape) -> float:
        # dx is exactly 0 for rows of length 1 (x̂ = 0, g - mean(g) = 0); a last-bit difference between g and
        # its row sum is then amplified by rstd, up to 1/sqrt(eps).
        return self.tolerance(output, shape) / EPS**0.5

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1, 1), (7, 1), (3, 7), (5, 1031), (2, 65539), (37, shape[1])]

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        weights = len(self.outputs(shape))  # weight read; dweight (and dbias) written
        stats = len(self.input_specs(shape)) - 3  # mean and rstd, or rstd alone
        return (self.itemsize * 3.0 * rows * cols + dtypes.dtype(self.wdtype).itemsize * weights * cols
                + 4.0 * stats * rows)


class LayerNormBackwardMixedSpace(LayerNormBackwardSpace):
    """LayerNorm backward of half dy, x with fp32 weight, dweight, dbias (mixed-precision training)."""

    name = "layernorm_backward_mixed"
    dtypes = ("float16", "bfloat16")
    weight_dtype = "float32"
    mixed_variant = ""
