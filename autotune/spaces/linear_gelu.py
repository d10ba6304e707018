"""``linear_gelu``: pre = A·Bᵀ + bias and C = gelu_tanh(pre) — `nn.Linear` followed by `nn.GELU(approximate="tanh")`
(GPT-2's MLP), in one launch plan. Both are outputs: C feeds the next layer, and ``pre`` is what the backward
differentiates GELU at (``gelu_bias_grad``, `autotune.spaces.bias_grad`), the tensor torch's own GELU would keep.

It is ``linear`` with a longer epilogue: the TMA wgmma algorithm stores the sum with the bias as ``pre``, then
C = gelu_tanh of the stored (rounded) value, as torch's GELU after a Linear takes it (kernel_templates/
gemm_wgmma_tma.cu, ``GEMM_GELU``; kernel_templates/gelu.cuh); the other algorithms, and split-K after its reduce, run
``gemm_bias_gelu`` after the product, in the same order. Same algorithms, tunables, accuracy contract and
rule defaults as gemm. GELU is 1.13-Lipschitz at most, so C keeps the product's tolerance.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune.shape import Shape
from autotune.spaces._gelu import gelu_tanh
from autotune.spaces.base import BufferSpec
from autotune.spaces.gemm_layouts import Layout
from autotune.spaces.linear import LinearSpace


class LinearGeluSpace(LinearSpace):
    """pre = A·Bᵀ + bias, C = gelu_tanh(pre): A (M×K), B stored N×K, bias (N)."""

    name = "linear_gelu"
    LAYOUT = Layout("B", bias=True, gelu=True)
    PRODUCT = "C = gelu(A·Bᵀ + bias) needs A (M, K) and B (N, K)"
    leading_dims = {"A": 2, "C": 2, "pre": 2}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {**super().outputs(shape), "pre": BufferSpec((shape[0], shape[1]), self.dtype)}

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        pre = super().reference(inputs, shape)["C"]
        return {"C": gelu_tanh(pre), "pre": pre}
