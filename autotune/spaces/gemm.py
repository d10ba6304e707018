"""GEMM, C = A·B, row-major, any M, N, K: the family and what its algorithms share.

Algorithms (the ``ALGO`` parameter; each with its own template, tunables and constraints):

* ``simt`` (float32): FFMA on the fp32 cores (`autotune.spaces.gemm_simt`).
* ``tf32x3`` (float32): 3×TF32 on tensor cores, mma.sync, FP32-accurate (`autotune.spaces.gemm_tf32x3`); 1×TF32
  is the separate family ``gemm_tf32`` (`autotune.spaces.gemm_tf32`).
* ``wgmma_tf32x3`` (float32): 3×TF32 on Hopper's wgmma with TMA, warp specialisation and a persistent grid,
  FP32-accurate, sm_90a only (`autotune.spaces.gemm_wgmma_tf32x3`).
* ``mma`` (float16, bfloat16): mma.sync m16n8k16 tensor cores, fp32 accumulation (`autotune.spaces.gemm_mma`).
* ``wgmma_tma`` (float16, bfloat16): the Hopper design, sm_90a only: TMA loads, a producer warpgroup feeding
  wgmma consumers (cooperative or ping-pong), a persistent grid (`autotune.spaces.gemm_wgmma_tma`); its stream-K
  schedule (`autotune.spaces.gemm_wgmma_tma_streamk`), and its form for rows TMA cannot stride (N or K not a
  multiple of 8), which copies such an operand into padded rows first (`autotune.spaces.gemm_wgmma_tma_padded`).
* ``wgmma`` (float16, bfloat16): Hopper warpgroup MMA from swizzled shared memory fed by cp.async, sm_90a only
  (`autotune.spaces.gemm_wgmma`).
* ``gemv`` (every dtype; M = 1 or N = 1 only): batch-1 products stream the matrix once
  (`autotune.spaces.gemm_gemv`).
* ``wgmma_skinny`` (float16, bfloat16): few rows (decoding) on Hopper, the product transposed so that wgmma's
  64-row side runs along N, K split over a cluster and summed in distributed shared memory, sm_90a only
  (`autotune.spaces.gemm_wgmma_skinny`).

Shape classes (`GemmSpace.shape_class`): M bucket (1, ≤16, ≤64, ≤256, large) and aspect (one column, narrow N,
deep K, or wide). The dispatcher borrows a tuned configuration only within a class and otherwise runs
`GemmSpace.rule_default`: GEMV for a row or a column, small block tiles with split-K for small M, split-K where
the output has too few tiles to fill the GPU.

dtype: float32 inputs and output, or float16 / bfloat16 inputs and output with fp32 accumulation.

Accuracy contract. A float32 request is answered only at fp32 accuracy: the tolerance of each validation input
is tied to the error the SIMT kernel (its default configuration: FFMA, fp32 accumulation along K) makes on the
very same inputs, measured by the worker before each check: `FP32_FACTOR` times it, at least `FP32_FLOOR`.
1×TF32 (about 3e-4) and half accumulation miss it by orders of magnitude; 3×TF32 meets it. (numpy's float32
matmul is no stand-in: its blocked accumulation is 2–3× more accurate than a K-sequential kernel at K = 16384.)
Half-precision outputs are held to a small multiple of their own rounding (`HALF_TOLERANCE`), which fp32
accumulation meets and half accumulation, over the K = 16384 validation case, does not. Inputs are uniform in
[-1, 1) and, in a second case, rows of A and columns of B scaled by powers of two over a wide range (2^±20 for
float32 and bfloat16, 2^±3 for float16, whose range is narrow).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces import _gemm_rules
from autotune.spaces.base import ALGO, UNIFORM, BufferSpec, Config, KernelSpace
from autotune.spaces.gemm_gemv import GemvGemm
from autotune.spaces.gemm_mma import MmaGemm
from autotune.spaces.gemm_simt import SimtGemm
from autotune.spaces.gemm_tf32x3 import Tf32x3Gemm
from autotune.spaces.gemm_wgmma import WgmmaGemm
from autotune.spaces.gemm_wgmma_skinny import WgmmaSkinnyGemm
from autotune.spaces.gemm_wgmma_tf32x3 import WgmmaTf32x3Gemm
from autotune.spaces.gemm_wgmma_tma import WgmmaTmaGemm
from autotune.spaces.gemm_wgmma_tma_padded import WgmmaTmaPaddedGemm
from autotune.spaces.gemm_wgmma_tma_streamk import WgmmaTmaStreamKGemm

WIDE = "wide"  # rows of A and columns of B scaled by 2^e, e uniform in ±WIDE_EXPONENT[dtype]
WIDE_EXPONENT = {"float32": 20, "bfloat16": 20, "float16": 3}
FP32_FACTOR = 2.0  # an fp32 answer may be at most this much less accurate than the SIMT kernel's
FP32_FLOOR = 1e-6  # at small K both are ~1e-7: differences there are rounding noise, far below TF32's ~3e-4
BASELINE_SANITY = 1e-4
HALF_TOLERANCE = {"float16": 1e-3, "bfloat16": 8e-3}


def matrix_operands(inputs: Mapping[str, tuple[int, ...]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes of A and B, each checked to be a non-empty 2-D matrix (`InvalidArgument` naming it)."""
    for name in ("A", "B"):
        dims = inputs[name]
        if len(dims) != 2:
            raise InvalidArgument(f"{name} must be a 2-D matrix, got shape {tuple(dims)}")
        if 0 in dims:
            raise InvalidArgument(f"{name} is empty (shape {tuple(dims)})")
    return inputs["A"], inputs["B"]


class GemmSpace(KernelSpace):
    name = "gemm"
    dims = ("M", "N", "K")
    default_shape = (4096, 4096, 4096)
    metric_unit = "TFLOP/s"
    leading_dims = {"A": 2, "C": 2}  # M: activations of any leading dims (B is a weight)
    algorithms = (SimtGemm, Tf32x3Gemm, WgmmaTf32x3Gemm, WgmmaTmaGemm, WgmmaTmaStreamKGemm, WgmmaTmaPaddedGemm,
                  MmaGemm, WgmmaGemm, GemvGemm, WgmmaSkinnyGemm)

    # --- problem --------------------------------------------------------------------------------------------
    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        m, n, k = shape
        return {"A": BufferSpec((m, k), self.dtype), "B": BufferSpec((k, n), self.dtype)}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        m, n, _ = shape
        return {"C": BufferSpec((m, n), self.dtype)}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        a, b = matrix_operands(inputs)
        if a[1] != b[0]:
            raise InvalidArgument(f"B has {b[0]} rows but A has {a[1]} columns: C = A·B needs A (M, K) and B (K, N)")
        return (a[0], b[1], a[1])

    def work(self, shape: Shape) -> float:
        m, n, k = shape
        return 2.0 * m * n * k

    # --- fallback -------------------------------------------------------------------------------------------
    def shape_class(self, shape: Shape) -> tuple:
        return _gemm_rules.shape_class(shape)

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        return _gemm_rules.rule_default(self, shape, device)

    # --- correctness ----------------------------------------------------------------------------------------
    def inputs(self, shape: Shape, rng: np.random.Generator, kind: str = UNIFORM) -> dict[str, np.ndarray]:
        m, n, k = shape
        a = rng.uniform(-1.0, 1.0, size=(m, k))
        b = rng.uniform(-1.0, 1.0, size=(k, n))
        if kind == WIDE:
            e = WIDE_EXPONENT[self.dtype]
            a *= np.exp2(rng.integers(-e, e + 1, size=(m, 1)))
            b *= np.exp2(rng.integers(-e, e + 1, size=(1, n)))
        elif kind != UNIFORM:
            raise ValueError(f"unknown input kind {kind!r}")
        return {"A": dtypes.encode(a, self.dtype), "B": dtypes.encode(b, self.dtype)}

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        return {"C": np.asarray(inputs["A"], np.float64) @ np.asarray(inputs["B"], np.float64)}

    def tolerance(self, output: str, shape: Shape) -> float:
        return HALF_TOLERANCE.get(self.dtype, FP32_FLOOR)

    def baseline_config(self) -> Config | None:
        if self.dtype != "float32" or "simt" not in self.algos:
            return None
        return {ALGO: "simt", **self.algos["simt"].default_config}

    def baseline_tolerance(self, output: str, error: float, shape: Shape) -> float:
        if error > BASELINE_SANITY:
            raise ValueError(f"the SIMT baseline's own error {error:.1e} is not fp32-level: the baseline is broken")
        return max(FP32_FACTOR * error, FP32_FLOOR)

    def validation_cases(self, shape: Shape) -> list[tuple[Shape, str]]:
        # Ragged against every tile size: the first keeps N and K multiples of 8 (vector paths with edges), the
        # second makes every row unaligned (scalar fall-back paths) and K no multiple of any mma K; the third and
        # fourth span a wide dynamic range, one of them along K = 16384 (N and K multiples of 8, so that the TMA
        # algorithm, which needs 16-byte row strides, is checked along a long K too). Then one row and one column
        # (the GEMV algorithm's shapes; every other algorithm computes them too), the last of them wide-range.
        return [
            ((333, 264, 104), UNIFORM),
            ((67, 131, 33), UNIFORM),
            ((129, 72, 264), WIDE),
            ((61, 72, 16384), WIDE),
            ((1, 131, 33), UNIFORM),
            ((67, 1, 33), UNIFORM),
            ((1, 70, 4099), WIDE),
        ]
