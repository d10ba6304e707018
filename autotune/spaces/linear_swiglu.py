"""``linear_swiglu``: C = silu(A·Gᵀ) · (A·Uᵀ), the SwiGLU of Llama's MLP before its down projection, where the gate
and up projections are one weight B = [G; U] stored 2N×K (a fused ``gate_up`` Linear, whose output torch would
``chunk`` in two): one product, and the activation in its epilogue, instead of a product of 2N columns, a silu and
a multiply over two strided halves.

Two algorithms. ``wgmma_skinny`` for decoding's few rows (kernel_templates/gemm_wgmma_skinny.cu, ``GEMM_SWIGLU``:
the transposed product, a stage holding gate and up rows of the same columns, the K slices' gate and up sums added
in the cluster before the activation). The TMA wgmma kernel (kernel_templates/gemm_wgmma_tma.cu, ``GEMM_SWIGLU``):
each BN-wide B stage holds BN/2 gate rows and the same BN/2 up rows, so a gate column and its up column meet in one
thread's accumulators, and the tile stores BN/2 columns of C. Float16 and bfloat16 on sm_90 (K a multiple of 8,
TMA's row strides). Its split-K (SPLIT_K, where the tiles are fewer than the SMs): each slice stores its gate and up
sums as two fp32 planes, and ``gemm_splitk_swiglu`` adds the slices up, then applies the activation (a product of
partial sums is not a partial product). Forward only: no backward family yet, so `autotune.torch` uses
it where no gradient is needed.

Accuracy: gate and up accumulate in fp32 and meet in fp32 before the one rounding of C (torch rounds both halves
and silu's output first), so C is held to gemm's half-precision tolerance (`HALF_TOLERANCE`).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces import _gemm_rules
from autotune.spaces._gemm_rules import MIN_K_PER_SPLIT
from autotune.spaces._gemm_splitk import PARTIAL, reduce_launch, splits_of
from autotune.spaces.base import ALGO, BufferSpec, Config, KernelSpace, Launch, Param, Step, TensorMap, ceil_div
from autotune.spaces.correctness import UNIFORM
from autotune.spaces.gemm import HALF_TOLERANCE, matrix_operands
from autotune.spaces.gemm_wgmma_skinny import WgmmaSkinnyGemm
from autotune.spaces.gemm_wgmma_tma import BK, WgmmaTmaGemm

# The rule's skinny tiles up to 32 rows, where they were measured against torch (2026-11-29d); gemm's go to 128.
SKINNY_MAX_ROWS = 32


class SwigluTma(WgmmaTmaGemm):
    """``wgmma_tma`` with B stored 2N×K = [gate; up] and the SwiGLU epilogue: tiles of BN/2 output columns."""

    parameters = tuple(
        Param("BN", (128, 256), "B rows per stage: BN/2 gate and BN/2 up rows, a tile of BN/2 columns of C")
        if p.name == "BN" else p
        for p in WgmmaTmaGemm.parameters
    )  # fmt: skip

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**super().defines(config), "B_K_MAJOR": 1, "GEMM_SWIGLU": 1}

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        reason = super(WgmmaTmaGemm, self).unfit(shape, device)  # compute capability only: N is any here
        if reason is None and shape[2] % 8:
            reason = (f"algorithm {self.name} copies with TMA, whose row strides are multiples of 16 bytes: K must be "
                      f"a multiple of 8 (got K={shape[2]})")  # fmt: skip
        return reason

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        # gemm's at the product's 2N columns: a slice's two M×N planes are the partial tile of M×2N it would have
        m, n, k = shape
        return super().constraints(config, (m, 2 * n, k), device)

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n, k = shape
        c = self.local(config)
        g = self.geometry(c)
        cluster, splits = c["CLUSTER_M"], splits_of(c)
        cluster_tiles = ceil_div(m, c["BM"] * cluster) * ceil_div(n, c["BN"] // 2)
        per_slice = max(1, device.multiprocessors // (cluster * splits))  # persistent, as gemm's
        launches: list[Step] = [
            Launch(
                kernel="gemm_wgmma_tma",
                grid=(cluster * min(cluster_tiles, per_slice), 1, splits),
                block=(g["threads"], 1, 1),
                shared_bytes=g["smem_bytes"],
                args=(
                    TensorMap("A", self.dtype, dims=(k, m), box=(BK, c["BM"])),
                    TensorMap("B", self.dtype, dims=(k, 2 * n), box=(BK, 64)),  # gate rows, then up rows
                    "C" if splits == 1 else PARTIAL, np.int32(m), np.int32(n), np.int32(k),
                ),
            )
        ]
        if splits > 1:  # gemm's reduce launch, on the planes' kernel
            reduce = reduce_launch(splits, m, n, device)
            launches.append(dataclasses.replace(reduce, kernel="gemm_splitk_swiglu"))
        return launches

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        splits, (m, n, _) = splits_of(config), shape
        return {} if splits == 1 else {PARTIAL: BufferSpec((splits, 2, m, n), "float32")}


class SwigluSkinny(WgmmaSkinnyGemm):
    """``wgmma_skinny`` for decoding's few rows: each stage holds BN gate rows and the same BN up rows of B (the one
    tensor map, up rows from N on); the slices' gate and up sums meet in the cluster's sum, then the activation."""

    K_MAJOR_B, PLANES = True, 2


class LinearSwigluSpace(KernelSpace):
    """C = silu(A·B[:N]ᵀ) · A·B[N:]ᵀ: A (M×K), B stored 2N×K (gate rows, then up rows), C (M×N)."""

    name = "linear_swiglu"
    dims = ("M", "N", "K")
    default_shape = (2048, 14336, 4096)  # Llama-3 8B's MLP over a 2048-token prompt
    metric_unit = "TFLOP/s"
    algorithms = (SwigluTma, SwigluSkinny)
    leading_dims = {"A": 2, "C": 2}

    # --- problem --------------------------------------------------------------------------------------------
    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        m, n, k = shape
        return {"A": BufferSpec((m, k), self.dtype), "B": BufferSpec((2 * n, k), self.dtype)}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        m, n, _ = shape
        return {"C": BufferSpec((m, n), self.dtype)}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        a, b = matrix_operands(inputs)
        if b[0] % 2:
            raise InvalidArgument(f"B has {b[0]} rows: it must hold the gate rows, then as many up rows (2N × K)")
        if a[1] != b[1]:
            raise InvalidArgument(f"A has {a[1]} columns but B has {b[1]}: C = silu(A·Gᵀ)·(A·Uᵀ) needs A (M, K) and "
                                  f"B = [G; U] (2N, K)")  # fmt: skip
        return (a[0], b[0] // 2, a[1])

    def work(self, shape: Shape) -> float:
        m, n, k = shape
        return 2.0 * m * (2 * n) * k

    # --- fallback -------------------------------------------------------------------------------------------
    def shape_class(self, shape: Shape) -> tuple:
        m, n, k = shape
        return _gemm_rules.shape_class((m, 2 * n, k))

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """1 to 32 rows (decoding): ``wgmma_skinny`` as gemm's rule takes it (`_gemm_rules.skinny_rule`).
        Otherwise cooperative 128×256 tiles (128 columns of C each) for more than 64 rows, a 64-row tile of one
        consumer below that; K is split where the tiles are fewer than the SMs, into the fewest slices that give
        every SM one, each at least `MIN_K_PER_SPLIT` long."""
        skinny = _gemm_rules.skinny_rule(self, shape, device, "wgmma_skinny", min_rows=1, max_rows=SKINNY_MAX_ROWS)
        if skinny is not None:
            return skinny
        algo = self.algos["wgmma_tma"]
        m, n, k = shape
        tile = {"BM": 128, "BN": 256, "WG": 2} if m > 64 else {"BM": 64, "BN": 256, "WG": 1}
        tiles = ceil_div(m, tile["BM"]) * ceil_div(n, tile["BN"] // 2)
        usable = [s for s in sorted(self.domain("wgmma_tma.SPLIT_K")) if k >= s * MIN_K_PER_SPLIT]
        split = 1
        if tiles < device.multiprocessors and usable:
            split = next((s for s in usable if tiles * s >= device.multiprocessors), usable[-1])
        return {ALGO: algo.name, **algo.default_config, **tile, "SPLIT_K": split}

    # --- correctness ----------------------------------------------------------------------------------------
    def inputs(self, shape: Shape, rng: np.random.Generator, kind: str = UNIFORM) -> dict[str, np.ndarray]:
        if kind != UNIFORM:
            raise ValueError(f"unknown input kind {kind!r}")
        m, n, k = shape
        scale = 1.0 / np.sqrt(k)  # products of order 1: silu's curve, not its linear tail
        return {"A": dtypes.encode(rng.uniform(-1.0, 1.0, size=(m, k)), self.dtype),
                "B": dtypes.encode(rng.uniform(-2.0, 2.0, size=(2 * n, k)) * scale, self.dtype)}  # fmt: skip

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        n = shape[1]
        a, b = np.asarray(inputs["A"], np.float64), np.asarray(inputs["B"], np.float64)
        gate, up = a @ b[:n].T, a @ b[n:].T
        return {"C": gate / (1.0 + np.exp(-gate)) * up}

    def tolerance(self, output: str, shape: Shape) -> float:
        return HALF_TOLERANCE[self.dtype]

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        # Ragged against every tile: M, N no multiple of 64 (a gate box past N reads up rows into unstored
        # columns), N below one box and odd (unaligned rows of C), one row, and a long K.
        return [(333, 264, 104), (67, 40, 40), (5, 37, 64), (1, 136, 64), (129, 200, 2056)]
