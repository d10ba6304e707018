"""GEMM of few rows on Hopper (decoding, small batches): C = A·B for float16 / bfloat16 computed transposed,
Cᵀ = Bᵀ·Aᵀ, so that wgmma's 64-row side runs along the weight's N and its narrow side (8 to 128) along A's rows; the
weight streams through TMA, K is split over the blocks of a thread block cluster, and the slices are summed in
distributed shared memory: no workspace, no second launch (template: kernel_templates/gemm_wgmma_skinny.cu,
sm_90a only).

Tunables: A rows per tile (BM, wgmma's N), columns of C per tile (BN: one or two m64 slices per consumer
warpgroup), consumer warpgroups (WG), k-tiles in flight (STAGES of 64), and K slices (SPLIT_K, the cluster's
size along z); at most `MAX_ACCUMULATORS` fp32 accumulators per thread (more spill). Like ``wgmma_tma`` it reads
rows through tensor maps: K (and N, where B is stored K×N) must be multiples of 8 elements; and it takes at most
`MAX_ROWS` rows (`unfit`).

The layout families (`autotune.spaces.gemm_layouts`) meet it through `for_layout`: B stored N×K (gemm_nt, linear,
linear_gelu) is read as it is, the weight rows K-major, and linear's bias (and linear_gelu's ``pre`` and GELU) is
applied to the slices' sum; A stored K×M (gemm_tn) is not offered (`unfit` says so).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.algorithm import Algorithm, smem_problems
from autotune.spaces.base import Config, Launch, Param, Step, TensorMap, ceil_div
from autotune.spaces.gemm_wgmma_tma import ALIGN_ELEMENTS, tma_rows_problem

BK = 64  # k per stage: a 128-byte swizzle row of a 16-bit type
MAX_ACCUMULATORS = 128  # fp32 accumulators per consumer thread (PLANES·slices·BM/2): more spill
# Each tile of A's rows streams all of B again: past a few such tiles the TMA algorithms, which read B once per
# 128-256 rows, are the ones to search, and a search proposing this one for M = 4096 would waste its trials.
MAX_ROWS = 256


class WgmmaSkinnyGemm(Algorithm):
    name = "wgmma_skinny"
    template = "gemm_wgmma_skinny.cu"
    dtypes = ("float16", "bfloat16")
    min_cc = (9, 0)
    max_cc = (9, 0)  # sm_90a code runs on compute capability 9.0 alone

    parameters = (
        Param("BM", (8, 16, 32, 64, 128), "rows of A per tile: wgmma's N"),
        Param("BN", (64, 128, 256), "columns of C per tile: the consumers' m64 slices of the weight"),
        Param("WG", (1, 2), "consumer warpgroups of 128 threads"),
        Param("STAGES", (2, 3, 4, 5, 6, 7, 8), "k-tiles of 64 in flight per block"),
        # At most 8: a portable cluster.
        Param("SPLIT_K", (1, 2, 3, 4, 6, 8), "K slices: the blocks of a cluster, summed in distributed shared memory"),
    )
    default_config = {"BM": 16, "BN": 128, "WG": 1, "STAGES": 6, "SPLIT_K": 4}
    K_MAJOR_B: ClassVar[bool] = False  # B stored N×K (the layout families' variant)
    PLANES: ClassVar[int] = 1  # weight row sets per tile (linear_swiglu's gate and up: 2)
    EPILOGUE_ARGS: ClassVar[tuple[str, ...]] = ()  # buffers after C (linear: the bias; linear_gelu: and pre)

    @classmethod
    def for_layout(cls, layout: Any) -> type[Algorithm]:
        """This algorithm in a layout family (`autotune.spaces.gemm_layouts.layout_variant`): B stored N×K read as
        stored, the bias (and linear_gelu's GELU, with ``pre``) applied to the sum; A stored K×M is not offered."""
        attrs: dict[str, object] = {"layout": layout, "__module__": cls.__module__}
        if layout.transposed == "B":
            attrs.update(K_MAJOR_B=True, EPILOGUE_ARGS=layout.epilogue_args())
            return type(f"{cls.__name__}{layout.transposed}", (cls,), attrs)
        return type(f"{cls.__name__}{layout.transposed}", (NotOffered, cls), attrs)

    def stage_bytes(self, config: Config) -> int:
        """Shared bytes of one k-tile in the ring: the weight's BN rows (per plane) and A's BM rows, 128 bytes each."""
        return (self.PLANES * config["BN"] + config["BM"]) * 128

    def geometry(self, config: Config) -> dict[str, int]:
        """Threads, m64 slices per consumer, shared bytes (the ring, or the fp32 tile of the sum where larger)."""
        bm, bn, wg, stages = config["BM"], config["BN"], config["WG"], config["STAGES"]
        ring = stages * self.stage_bytes(config)
        tile = self.PLANES * bm * (bn + 4) * 4
        return {
            "threads": 128 * wg + 32,
            "slices": bn // (64 * wg) if bn % (64 * wg) == 0 else 0,
            "smem_bytes": max(ring, tile) + 1024 + 16 * stages,
        }

    def defines(self, config: Config) -> dict[str, int | str]:
        flags = {"B_K_MAJOR": 1} if self.K_MAJOR_B else {}
        if "bias" in self.EPILOGUE_ARGS:
            flags["GEMM_BIAS"] = 1
        if "pre" in self.EPILOGUE_ARGS:
            flags["GEMM_GELU"] = 1
        if self.PLANES == 2:
            flags["GEMM_SWIGLU"] = 1
        return {**super().defines(config), **flags}

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        reason = super().unfit(shape, device)
        if reason is not None:
            return reason
        m, n, k = shape
        if m > MAX_ROWS:
            return f"algorithm {self.name} is for few rows: at most {MAX_ROWS} (got M={m})"
        if k % ALIGN_ELEMENTS or (not self.K_MAJOR_B and n % ALIGN_ELEMENTS):
            return tma_rows_problem(self.name, "K" if self.K_MAJOR_B else "N and K", f"N={n}, K={k}")
        return None

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        c = self.local(config)
        g = self.geometry(c)
        problems = []
        unfit = self.unfit(shape, device)
        if unfit:
            problems.append(unfit)
        if g["slices"] not in (1, 2):
            problems.append(f"BN={c['BN']} over {c['WG']} consumers: one or two m64 slices each")
        elif self.PLANES * g["slices"] * c["BM"] // 2 > MAX_ACCUMULATORS:
            planes = f" in {self.PLANES} planes" if self.PLANES > 1 else ""
            problems.append(f"BM={c['BM']} with {g['slices']} m64 slices per consumer{planes}: "
                            f"{self.PLANES * g['slices'] * c['BM'] // 2} accumulators per thread, at most "
                            f"{MAX_ACCUMULATORS}")
        problems += smem_problems(g["smem_bytes"], device)
        k_tiles = ceil_div(shape[2], BK)
        if c["SPLIT_K"] > k_tiles:
            problems.append(f"SPLIT_K={c['SPLIT_K']} exceeds the {k_tiles} k-tiles of K={shape[2]}")
        return problems

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n, k = shape
        c = self.local(config)
        rows = self.PLANES * n  # the weight's rows as stored (SwiGLU: gate rows, then up rows)
        if self.K_MAJOR_B:
            weight = TensorMap("B", self.dtype, dims=(k, rows), box=(BK, c["BN"]))
        else:
            weight = TensorMap("B", self.dtype, dims=(n, k), box=(64, BK))
        rows_of_a = TensorMap("A", self.dtype, dims=(k, m), box=(BK, c["BM"]))
        grid = (ceil_div(n, c["BN"]), ceil_div(m, c["BM"]), c["SPLIT_K"])
        g = self.geometry(c)
        args = (weight, rows_of_a, "C", *self.EPILOGUE_ARGS, np.int32(m), np.int32(n), np.int32(k))
        return [Launch("gemm_wgmma_skinny", grid, (g["threads"], 1, 1), g["smem_bytes"], args)]

    def describe(self, config: Config) -> str:
        c = config
        split = f" splitk{c['SPLIT_K']}" if c["SPLIT_K"] > 1 else ""
        return f"wgmma skinny {c['BM']}x{c['BN']}x{BK} wg{c['WG']} s{c['STAGES']}{split}"


class NotOffered:
    """Mixed into a layout variant the template does not compute: `unfit` says so for every shape."""

    layout: ClassVar[Any]
    name: ClassVar[str]

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        return f"algorithm {self.name} does not compute {self.layout.transposed} stored transposed"
