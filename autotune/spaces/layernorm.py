"""LayerNorm forward over the rows of a float32 matrix: y, mean and rstd (template: layernorm.cu).

Tunables: those of every row kernel (autotune.spaces._rows) and how the statistics are computed: two passes,
Welford, or one pass of shifted sums of squares. Inputs hold constant rows (variance 0).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._rows import ROW_DEFAULT, ROW_PARAMETERS, RowSpace
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step

EPS = 1e-5
STATS = {"two_pass": 0, "welford": 1, "shifted_sumsq": 2}


def layernorm_inputs(shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """x with a non-zero mean and every fifth row constant (dyadic values: their sums are exact in fp32)."""
    rows, cols = shape
    x = (rng.standard_normal(shape) * 2 + 3).astype(np.float32)
    x[::5] = (np.arange(len(x[::5]))[:, None] % 7 + 1) * 0.75
    return {
        "x": x,
        "weight": rng.uniform(0.5, 1.5, cols).astype(np.float32),
        "bias": rng.uniform(-0.5, 0.5, cols).astype(np.float32),
    }


def row_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float64)
    mean = x.mean(axis=1)
    return mean, 1.0 / np.sqrt(x.var(axis=1) + EPS)


class LayerNormSpace(RowSpace):
    name = "layernorm"
    template = "layernorm.cu"
    parameters = (*ROW_PARAMETERS, Param("STATS", tuple(STATS), "two passes, Welford, or shifted sums of squares"))
    default_config = {**ROW_DEFAULT, "STATS": "two_pass"}

    def defines(self, config: Config) -> dict[str, int | str]:
        out = self.row_defines(config)
        out["STATS"] = STATS[config["STATS"]]
        return out

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        args = ("x", "weight", "bias", "y", "mean", "rstd", np.int32(rows), np.int32(cols), np.float32(EPS))
        return [Launch("layernorm", self.grid(config, rows), (config["BLOCK"], 1, 1), 0, args)]

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"x": BufferSpec(shape), "weight": BufferSpec((cols,)), "bias": BufferSpec((cols,))}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return layernorm_inputs(shape, rng)

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        shape = super().infer_shape(inputs)
        for name in ("weight", "bias"):
            if tuple(inputs[name]) != (shape[1],):
                raise InvalidArgument(f"{name} has shape {tuple(inputs[name])}, x has {shape[1]} columns")
        return shape

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"y": BufferSpec(shape), "mean": BufferSpec((rows,)), "rstd": BufferSpec((rows,))}

    def reference(self, inputs, shape):
        mean, rstd = row_stats(inputs["x"])
        x = inputs["x"].astype(np.float64)
        y = (x - mean[:, None]) * rstd[:, None] * inputs["weight"].astype(np.float64) + inputs["bias"]
        return {"y": y, "mean": mean, "rstd": rstd}

    def tolerance(self, output: str, shape: Shape) -> float:
        return 2e-5

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        return 4.0 * (2 * rows * cols + 2 * cols + 2 * rows)
