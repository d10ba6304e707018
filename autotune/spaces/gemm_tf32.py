"""GEMM with 1×TF32 tensor-core products: C = A·B in float32 storage at TF32 accuracy, opted into by name.

A kernel family of its own (``gemm_tf32``), not an algorithm of ``gemm``: its error (~1e-4 relative, the operands
rounded to 10-bit mantissas) is orders of magnitude above what an fp32 request is held to, so its results are
stored and dispatched under this name only and never answer ``gemm``. Same problem, inputs, reference and
validation cases (uniform, wide-range, K = 16384) as ``gemm``; the tolerance is fixed (`TF32_TOLERANCE`) rather
than tied to the SIMT kernel's error. Algorithm: `autotune.spaces.gemm_tf32x3.Tf32Gemm` (the 3×TF32 template
without the compensation).
"""

from __future__ import annotations

from autotune.shape import Shape
from autotune.spaces.base import Config
from autotune.spaces.gemm import GemmSpace
from autotune.spaces.gemm_tf32x3 import Tf32Gemm

# Relative Frobenius error accepted. Measured in a simulation of the kernel (operands rounded to TF32, products
# accumulated with round-toward-zero): ~3e-4 on uniform and wide-range inputs up to K = 16384; the margin covers
# input sets less favourable than uniform ones. An fp32 kernel makes ~1e-6.
TF32_TOLERANCE = 5e-3


class GemmTf32Space(GemmSpace):
    name = "gemm_tf32"
    algorithms = (Tf32Gemm,)

    def tolerance(self, output: str, shape: Shape) -> float:
        return TF32_TOLERANCE

    def baseline_config(self) -> Config | None:
        return None  # a fixed tolerance: TF32 is not held to the fp32 SIMT kernel's error
