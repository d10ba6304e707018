"""float32 GEMM at FP32 accuracy on Hopper's tensor cores: 3×TF32 on wgmma, fed by TMA, warp-specialised and
persistent like ``wgmma_tma`` (kernel_templates/gemm_wgmma_tf32x3.cu: this algorithm's defaults around
gemm_wgmma_tma.cu with DTYPE = 0; sm_90a only).

A pre-pass (kernel_templates/gemm_tf32_split.cuh) splits each operand x into big = tf32(x) and small =
tf32(x − big), B transposed on the way (tf32 wgmma reads both operands K-major): four workspaces, A big and small
(M×K) and B big and small (N×K). The main loop accumulates small·big + big·small + big·big on the tensor cores
over windows of FOLD k-tiles, each window added to a register total with FADD: the tensor cores' own fp32
accumulation truncates, so a window keeps that error relative to a few k-tiles' sum. The accuracy contract is the
family's (within 2× of the SIMT kernel's error on the very same inputs, K up to 16384), checked on every candidate.

TMA strides the workspaces, whose rows must be whole 16 bytes: the pre-pass writes them with K padded to a
multiple of 4, the padding zero. So M, N and K are all free.
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._gemm_splitk import split_workspace, splits_of
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step, TensorMap, ceil_div
from autotune.spaces.gemm_wgmma_tma import WgmmaTmaGemm

BK = 32  # fp32 elements per 128-byte swizzle row: the TMA box's inner extent
ALIGN_ELEMENTS = 4  # 16 bytes of fp32
SPLIT_THREADS, SPLIT_TILE = 256, 32  # gemm_tf32_split: a 32×32 tile per block of 256 threads
MAX_GRID_Y = 65535  # gridDim.y's limit: the pre-pass puts tile rows there
WORKSPACE = {"A": ("a_big", "a_small"), "B": ("b_big", "b_small")}


def padded(k: int) -> int:
    """K rounded up to whole 16-byte rows of fp32: the workspaces' row length."""
    return ceil_div(k, ALIGN_ELEMENTS) * ALIGN_ELEMENTS


class WgmmaTf32x3Gemm(WgmmaTmaGemm):
    name = "wgmma_tf32x3"
    template = "gemm_wgmma_tf32x3.cu"  # its defaults, then gemm_wgmma_tma.cu
    dtypes = ("float32",)

    parameters = (
        Param("BM", (64, 128, 256), "tile rows (cooperative: split over the consumers; ping-pong: one consumer's)"),
        Param("BN", (64, 128, 256), "tile columns: the wgmma N"),
        Param("WG", (1, 2), "consumer warpgroups of 128 threads"),
        Param("PINGPONG", (0, 1), "1: the two consumers take turns, a whole tile each; 0: they share each tile"),
        Param("STAGES", (2, 3, 4, 5, 6), "shared-memory stages of the TMA ring (four operand tiles each)"),
        Param("GROUP_M", (1, 8, 16), "tile rasterisation: tiles sweep GROUP_M tile rows (L2 reuse)"),
        Param("CLUSTER_M", (1, 2), "2: clusters of two blocks along M share B through TMA multicast"),
        # The truncation grows with the window: on the H100, 8 k-tiles (256 of K) missed the contract on wide-range
        # inputs (1.7e-6 against 1.0e-6 at 129x72x264) and 4 did once (1.02e-6), so windows stop at 2.
        Param("FOLD", (1, 2), "k-tiles per accumulation window of the tensor cores (then added with FADD)"),
        Param("SPLIT_K", (1, 2, 3, 4, 6, 8, 16, 32), "K slices run in parallel (fp32 workspace + reduce); launch only"),
    )
    default_config = {
        "BM": 64, "BN": 128, "WG": 1, "PINGPONG": 0, "STAGES": 4, "GROUP_M": 8, "CLUSTER_M": 1, "FOLD": 2,
        "SPLIT_K": 1,
    }  # fmt: skip
    LABEL, K_TILE = "wgmma 3xtf32", BK
    MAX_ACCUMULATORS = 128  # the window and its total: beyond 128 in all, untried

    @staticmethod
    def geometry(config: Config) -> dict[str, int]:
        g = WgmmaTmaGemm.geometry(config)
        stage = 2 * (config["BM"] + config["BN"]) * BK * 4  # A big, A small, B big, B small
        g["accumulators"] *= 2  # the window and its total
        g["smem_bytes"] = config["STAGES"] * stage + 1024 + 16 * config["STAGES"] + 16
        return g

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        return super(WgmmaTmaGemm, self).unfit(shape, device)  # the compute-capability checks; any M, N, K

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        problems = super().constraints(config, shape, device)
        if not problems:  # the split pre-pass's grid (a layout family's own splits too)
            tall = [s.grid[1] for s in self.splits(shape) if s.grid[1] > MAX_GRID_Y]
            if tall:
                problems.append(f"the split pre-pass would need {tall[0]} rows of 32×32 tiles (at most {MAX_GRID_Y})")
        return problems

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n, k = shape
        c, kp = self.local(config), padded(k)
        main, *reduce = super().launches(config, shape, device)
        assert isinstance(main, Launch)
        maps = (
            TensorMap("a_big", "float32", dims=(kp, m), box=(BK, c["BM"])),
            TensorMap("b_big", "float32", dims=(kp, n), box=(BK, c["BN"])),
            TensorMap("a_small", "float32", dims=(kp, m), box=(BK, c["BM"])),
            TensorMap("b_small", "float32", dims=(kp, n), box=(BK, c["BN"])),
        )
        main = Launch(main.kernel, main.grid, main.block, main.shared_bytes, (*maps, *main.args[2:]))
        return [*self.splits(shape), main, *reduce]

    def splits(self, shape: Shape) -> tuple[Launch, Launch]:
        """The pre-pass: A (M×K) split as it is, B (K×N) transposed, into rows of K padded."""
        m, n, k = shape
        kp = padded(k)
        return self._split("A", m, k, kp, transpose=False), self._split("B", k, n, kp, transpose=True)

    @staticmethod
    def _split(source: str, rows: int, cols: int, ld: int, transpose: bool) -> Launch:
        """Split ``source`` (rows×cols) into its workspaces, rows of ``ld`` (K padded), transposed for B."""
        big, small = WORKSPACE[source]
        grid = (ceil_div(cols, SPLIT_TILE), ceil_div(ld, SPLIT_TILE)) if transpose else (
            ceil_div(ld, SPLIT_TILE), ceil_div(rows, SPLIT_TILE))  # fmt: skip
        return Launch(
            kernel="gemm_tf32_split",
            grid=(*grid, 1),
            block=(SPLIT_THREADS, 1, 1),
            shared_bytes=0,
            args=(source, big, small, np.int32(rows), np.int32(cols), np.int32(int(transpose)), np.int32(ld)),
        )

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        m, n, k = shape
        spaces = {name: BufferSpec((m, padded(k)), "float32") for name in WORKSPACE["A"]}
        spaces.update({name: BufferSpec((n, padded(k)), "float32") for name in WORKSPACE["B"]})
        return {**spaces, **split_workspace(splits_of(config), m, n)}
