"""LayerNorm forward over the rows of a matrix: y, mean and rstd (template: layernorm.cu).

x and y in float32, float16 or bfloat16; weight and bias in the same dtype (``layernorm``) or in fp32 with half x
(``layernorm_mixed``); mean, rstd and all arithmetic in fp32 (as torch keeps them).

Tunables: those of every row kernel (autotune.spaces._rows) and how the statistics are computed: two passes,
Welford, or one pass of shifted sums of squares. Inputs hold constant rows (variance 0).
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

EPS = 1e-5
STATS = {"two_pass": 0, "welford": 1, "shifted_sumsq": 2}


def layernorm_inputs(shape: Shape, rng: np.random.Generator, dtype: str = "float32",
                     wdtype: str = "float32") -> dict[str, np.ndarray]:
    """x with a non-zero mean and every fifth row constant (dyadic values: their sums are exact in fp32), as host
    arrays of ``dtype`` (x) and ``wdtype`` (weight, bias)."""
    rows, cols = shape
    x = rng.standard_normal(shape) * 2 + 3
    x[::5] = (np.arange(len(x[::5]))[:, None] % 7 + 1) * 0.75
    return {
        "x": dtypes.encode(x, dtype),
        "weight": dtypes.encode(rng.uniform(0.5, 1.5, cols), wdtype),
        "bias": dtypes.encode(rng.uniform(-0.5, 0.5, cols), wdtype),
    }


def row_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float64)
    mean = x.mean(axis=1)
    return mean, 1.0 / np.sqrt(x.var(axis=1) + EPS)


class LayerNormSpace(RowKernelSpace):
    name = "layernorm"
    template = "layernorm.cu"
    parameters = (*ROW_PARAMETERS, Param("STATS", tuple(STATS), "two passes, Welford, or shifted sums of squares"))
    default_config = {**ROW_DEFAULT, "STATS": "two_pass"}
    mixed_variant = "layernorm_mixed"
    leading_dims = {"x": 2, "y": 2, "mean": 1, "rstd": 1}

    def defines(self, config: Config) -> dict[str, int | str]:
        out = self.row_defines(config)
        out["STATS"] = STATS[config["STATS"]]
        return out

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        args = ("x", "weight", "bias", "y", "mean", "rstd", np.int32(rows), np.int32(cols), np.float32(EPS))
        return self.row_launches("layernorm", config, shape, args)

    def split_problems(self, config: Config) -> list[str]:
        if config["STATS"] == "two_pass":
            return ["MAPPING=split needs STATS welford or shifted_sumsq (statistics from one pass)"]
        return []

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"x": self.elem(shape), "weight": self.weight(cols), "bias": self.weight(cols)}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return layernorm_inputs(shape, rng, self.dtype, self.wdtype)

    def rule_extra(self, config: Config, shape: Shape) -> Config:
        # Rows in registers make a second pass free; otherwise one pass and one exchange (shifted sums stay exact
        # on constant and offset rows): measured best on 4 of 5 shapes with the row in shared memory.
        return {"STATS": "two_pass" if config["CACHE"] == 1 and config["MAPPING"] != "split" else "shifted_sumsq"}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        shape = super().infer_shape(inputs)
        for name in ("weight", "bias"):
            if tuple(inputs[name]) != (shape[1],):
                raise InvalidArgument(f"{name} has shape {tuple(inputs[name])}, x has {shape[1]} columns")
        return shape

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"y": self.elem(shape), "mean": BufferSpec((rows,)), "rstd": BufferSpec((rows,))}

    def reference(self, inputs, shape):
        mean, rstd = row_stats(inputs["x"])
        x = inputs["x"].astype(np.float64)
        y = (x - mean[:, None]) * rstd[:, None] * inputs["weight"].astype(np.float64) + inputs["bias"]
        return {"y": y, "mean": mean, "rstd": rstd}

    def fp32_tolerance(self, output: str, shape: Shape) -> float:
        return 2e-5

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        return self.itemsize * 2.0 * rows * cols + dtypes.dtype(self.wdtype).itemsize * 2 * cols + 4.0 * 2 * rows


class LayerNormMixedSpace(LayerNormSpace):
    """LayerNorm of half x with fp32 weight and bias (mixed-precision training)."""

    name = "layernorm_mixed"
    dtypes = ("float16", "bfloat16")
    weight_dtype = "float32"
    mixed_variant = ""
