"""``linear``: C = A·Bᵀ + bias, `torch.nn.functional.linear` — A (M×K) the input rows, B stored N×K (the
weight), bias a length-N vector; fp32 accumulation, the bias added in fp32.

It is ``gemm_nt`` (`autotune.spaces.gemm_layouts`) with the bias: the TMA wgmma algorithm adds it in its epilogue
before rounding (and after the split-K reduce, when split), the others with ``gemm_bias_add`` after the product.
Same algorithms, tunables, accuracy contract and rule defaults as gemm.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune import dtypes
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces.base import BufferSpec
from autotune.spaces.gemm_layouts import GemmNtSpace, Layout


class LinearSpace(GemmNtSpace):
    """C = A·Bᵀ + bias: A (M×K), B stored N×K, bias (N)."""

    name = "linear"
    LAYOUT = Layout("B", bias=True)
    PRODUCT = "C = A·Bᵀ + bias needs A (M, K) and B (N, K)"

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {**super().input_specs(shape), "bias": BufferSpec((shape[1],), self.dtype)}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        shape = super().infer_shape(inputs)
        bias = tuple(inputs["bias"])
        if bias != (shape[1],):
            raise InvalidArgument(f"bias has shape {bias}: C = A·Bᵀ + bias needs a bias of ({shape[1]},), one per row "
                                  f"of B")  # fmt: skip
        return shape

    def inputs(self, shape: Shape, rng: np.random.Generator, kind: str = "uniform") -> dict[str, np.ndarray]:
        made = super().inputs(shape, rng, kind)
        made["bias"] = dtypes.encode(rng.uniform(-1.0, 1.0, size=(shape[1],)), self.dtype)
        return made

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        product = super().reference(inputs, shape)["C"]
        return {"C": product + np.asarray(inputs["bias"], np.float64)[None, :]}
