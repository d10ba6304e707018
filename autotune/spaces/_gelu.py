"""GELU's tanh form and its derivative in float64: the references of ``linear_gelu`` and ``gelu_bias_grad`` (the
kernels' side is kernel_templates/gelu.cuh)."""

from __future__ import annotations

import numpy as np

SQRT_2_OVER_PI, CUBIC = float(np.sqrt(2.0 / np.pi)), 0.044715


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """torch's ``gelu(x, approximate="tanh")``: 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³)."""
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + CUBIC * x**3)))


def gelu_tanh_grad(x: np.ndarray) -> np.ndarray:
    """d/dx of `gelu_tanh`."""
    x = np.asarray(x, np.float64)
    t = np.tanh(SQRT_2_OVER_PI * (x + CUBIC * x**3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x)
