"""RMSNorm backward: dx and dweight from dy, x, weight and the forward's rstd (LayerNorm's backward family, both
algorithms, with RMS=1, which drops the mean and dbias).

With x̂ = x·rstd and g = dy·w:  dx = rstd·(g − x̂·mean(g·x̂)),  dweight = Σ_rows dy·x̂.
dtypes and tunables as LayerNorm's backward (`autotune.spaces.layernorm_backward`); ``rmsnorm_backward_mixed``
takes fp32 weight and dweight with half dy and x.
"""

from __future__ import annotations

import numpy as np

from autotune import dtypes
from autotune.shape import Shape
from autotune.spaces.base import BufferSpec
from autotune.spaces.layernorm_backward import LayerNormBackwardSpace
from autotune.spaces.rmsnorm import EPS


class RmsNormBackwardSpace(LayerNormBackwardSpace):
    name = "rmsnorm_backward"
    rms = True
    mixed_variant = "rmsnorm_backward_mixed"

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"dy": self.elem(shape), "x": self.elem(shape), "weight": self.weight(cols),
                "rstd": BufferSpec((rows,))}  # fmt: skip

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        rows, cols = shape
        x = dtypes.encode(rng.standard_normal(shape) + 0.5, self.dtype)
        xs = dtypes.decode(x, self.dtype)
        rstd = 1.0 / np.sqrt((xs * xs).mean(axis=1) + EPS)  # what the forward pass hands to the backward pass
        return {
            "dy": dtypes.encode(rng.standard_normal(shape), self.dtype),
            "x": x,
            "weight": dtypes.encode(rng.uniform(0.5, 1.5, cols), self.wdtype),
            "rstd": rstd.astype(np.float32),
        }

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"dx": self.elem(shape), "dweight": self.weight(cols)}

    def reference(self, inputs, shape):
        dy = np.asarray(inputs["dy"], np.float64)
        rstd = np.asarray(inputs["rstd"], np.float64)[:, None]
        xhat = np.asarray(inputs["x"], np.float64) * rstd
        g = dy * np.asarray(inputs["weight"], np.float64)
        dx = rstd * (g - xhat * (g * xhat).mean(axis=1, keepdims=True))
        return {"dx": dx, "dweight": (dy * xhat).sum(axis=0)}

    def zero_tolerance(self, output: str, shape: Shape) -> float:
        return self.tolerance(output, shape)

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        # No rows of length 1: there x̂ = ±sqrt(1 - eps/(x²+eps)) and dx = rstd·g·eps/(x²+eps), a difference of
        # 1 and 1 - 1e-6 that no fp32 computation resolves to a relative tolerance.
        return [(1, 7), (3, 7), (5, 1031), (2, 65539), (37, shape[1])]


class RmsNormBackwardMixedSpace(RmsNormBackwardSpace):
    """RMSNorm backward of half dy, x with fp32 weight and dweight (mixed-precision training)."""

    name = "rmsnorm_backward_mixed"
    dtypes = ("float16", "bfloat16")
    weight_dtype = "float32"
    mixed_variant = ""
