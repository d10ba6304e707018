"""Hopper GEMM the Hopper way: C = A·B for float16 / bfloat16 with fp32 accumulation, TMA loads feeding wgmma,
a producer warpgroup and consumer warpgroups (warp specialisation), and a persistent grid (template:
kernel_templates/gemm_wgmma_tma.cu, sm_90a only).

Tunables: the tile (BM × BN), consumer warpgroups (WG), their schedule (PINGPONG: cooperative on one tile, or
taking turns tile by tile so that one's epilogue hides behind the other's main loop), the depth of the TMA ring
(STAGES of BK = 64), the tile rasterisation (GROUP_M), clusters of two blocks along M that load B once for
both by TMA multicast (CLUSTER_M), and, for outputs with fewer tiles than SMs, split-K (SPLIT_K, a launch choice:
the grid's z slices walk the tiles over their share of K into an fp32 workspace, summed in a fixed order by
`autotune.spaces._gemm_splitk`); the stream-K schedule of the same template is its own algorithm
(`autotune.spaces.gemm_wgmma_tma_streamk`).

The copy engine reads A and B through tensor maps (`autotune.spaces.base.TensorMap`) that the launch plan encodes
for the arrays' pointers: row strides and bases must be 16-byte aligned, so K and N must be multiples of 8
elements (`unfit`: other shapes are computed by the other algorithms), and an array at an unaligned address is
refused with one line at call time. Boxes past the matrix's edges are zero-filled, so ragged M, N, K are exact.
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._gemm_splitk import (
    MAX_PARTIAL_BYTES,
    PARTIAL,
    partial_bytes,
    reduce_launch,
    split_workspace,
    splits_of,
)
from autotune.spaces.algorithm import Algorithm, smem_problems
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step, TensorMap, ceil_div

BK = 64  # one 128-byte swizzle row of 16-bit elements: the TMA box's inner extent
# fp32 accumulators per consumer thread (the template's static_assert allows 192). Above 128, two consumers get 240
# registers each (setmaxnreg 24/240, within the 384 × 168 given at launch): a ping-pong consumer then owns a whole
# 128×192 tile, the layout QuACK keeps, which hides one consumer's epilogue behind the other's main loop at short K.
# Compiled without spills, except with the bias epilogue (12 bytes), which the layout families refuse there.
MAX_ACCUMULATORS = 192
ALIGN_ELEMENTS = 8  # 16 bytes of a 16-bit type: TMA's stride granularity


def tma_rows_problem(algorithm: str, dims: str, got: str) -> str:
    """Why ``algorithm`` cannot read rows of ``dims`` (e.g. "N and K") that are not whole 16 bytes (``got``: the
    values, "N=…, K=…")."""
    return (f"algorithm {algorithm} copies with TMA, whose row strides are multiples of 16 bytes: {dims} must be "
            f"multiples of {ALIGN_ELEMENTS} (got {got})")  # fmt: skip


class WgmmaTmaGemm(Algorithm):
    name = "wgmma_tma"
    template = "gemm_wgmma_tma.cu"
    dtypes = ("float16", "bfloat16")
    min_cc = (9, 0)
    max_cc = (9, 0)  # sm_90a code runs on compute capability 9.0 alone

    parameters = (
        Param("BM", (64, 128, 256), "tile rows (cooperative: split over the consumers; ping-pong: one consumer's)"),
        Param("BN", (64, 128, 192, 256), "tile columns: the wgmma N"),
        Param("WG", (1, 2), "consumer warpgroups of 128 threads"),
        Param("PINGPONG", (0, 1), "1: the two consumers take turns, a whole tile each; 0: they share each tile"),
        Param("STAGES", (2, 3, 4, 5, 6, 7), "shared-memory stages of the TMA ring"),
        Param("GROUP_M", (1, 8, 16), "tile rasterisation: tiles sweep GROUP_M tile rows (L2 reuse)"),
        Param("CLUSTER_M", (1, 2), "2: clusters of two blocks along M share B through TMA multicast"),
        Param("SPLIT_K", (1, 2, 3, 4, 6, 8, 16, 32), "K slices run in parallel (fp32 workspace + reduce); launch only"),
    )
    default_config = {
        "BM": 128, "BN": 256, "WG": 2, "PINGPONG": 0, "STAGES": 4, "GROUP_M": 8, "CLUSTER_M": 1, "SPLIT_K": 1,
    }  # fmt: skip
    LAUNCH_ONLY = ("SPLIT_K",)  # parameters of the launch plan, not of the compiled kernel
    MAX_ACCUMULATORS: int = MAX_ACCUMULATORS
    LABEL, K_TILE = "wgmma+tma", BK  # how `describe` names it, and its k-tile

    @staticmethod
    def geometry(config: Config) -> dict[str, int]:
        """The template's derived quantities: threads, rows per consumer, m64 slices and accumulators per
        consumer thread, shared bytes."""
        bm, bn, wg = config["BM"], config["BN"], config["WG"]
        rows = bm if config["PINGPONG"] else bm // wg
        m_tiles = rows // 64 if rows % 64 == 0 else 0
        stage = (bm + bn) * BK * 2
        return {
            "threads": 128 * (wg + 1),
            "consumer_rows": rows,
            "m_tiles": m_tiles,
            "accumulators": m_tiles * bn // 2,
            "smem_bytes": config["STAGES"] * stage + 1024 + 16 * config["STAGES"] + 16,
        }

    def defines(self, config: Config) -> dict[str, int | str]:
        return {k: v for k, v in super().defines(config).items() if k not in self.LAUNCH_ONLY}

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        reason = super().unfit(shape, device)
        if reason is not None:
            return reason
        _, n, k = shape
        if n % ALIGN_ELEMENTS or k % ALIGN_ELEMENTS:
            return tma_rows_problem(self.name, "N and K", f"N={n}, K={k}")
        return None

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        g = self.geometry(config)
        problems = []
        unfit = self.unfit(shape, device)
        if unfit:
            problems.append(unfit)
        if config["PINGPONG"] and config["WG"] != 2:
            problems.append("ping-pong needs two consumer warpgroups (WG=2)")
        if g["m_tiles"] not in (1, 2):
            problems.append(f"{g['consumer_rows']} rows per consumer: one or two m64 slices (64 or 128 rows)")
        if g["accumulators"] > self.MAX_ACCUMULATORS:
            problems.append(f"{g['accumulators']} accumulators per thread (> {self.MAX_ACCUMULATORS}) would spill")
        problems += smem_problems(g["smem_bytes"], device)
        splits, (m, n, k) = splits_of(config), shape
        if splits > 1 and partial_bytes(splits, m, n) > MAX_PARTIAL_BYTES:
            problems.append(f"SPLIT_K={splits} needs {partial_bytes(splits, m, n) >> 20} MiB of fp32 partials")
        if splits > ceil_div(k, BK):
            problems.append(f"SPLIT_K={splits} exceeds the {ceil_div(k, BK)} k-tiles of K={k}")
        return problems

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n, k = shape
        c = self.local(config)
        g = self.geometry(c)
        cluster, splits = c["CLUSTER_M"], c.get("SPLIT_K", 1)
        cluster_tiles = ceil_div(m, c["BM"] * cluster) * ceil_div(n, c["BN"])
        # Persistent: about one block per SM walks the (cluster) tiles of its K slice (the grid's z); clusters
        # keep their blocks together.
        per_slice = max(1, device.multiprocessors // (cluster * splits))
        blocks = cluster * min(cluster_tiles, per_slice)
        launches: list[Step] = [
            Launch(
                kernel="gemm_wgmma_tma",
                grid=(blocks, 1, splits),
                block=(g["threads"], 1, 1),
                shared_bytes=g["smem_bytes"],
                args=(
                    TensorMap("A", self.dtype, dims=(k, m), box=(BK, c["BM"])),
                    TensorMap("B", self.dtype, dims=(n, k), box=(64, BK)),
                    "C" if splits == 1 else PARTIAL, np.int32(m), np.int32(n), np.int32(k),
                ),
            )
        ]
        if splits > 1:
            launches.append(reduce_launch(splits, m, n, device))
        return launches

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        return split_workspace(splits_of(config), shape[0], shape[1])

    def describe(self, config: Config) -> str:
        c = config
        schedule = "pingpong" if c["PINGPONG"] else "coop"
        fold = f" fold{c['FOLD']}" if "FOLD" in c else ""
        cluster = f" cluster{c['CLUSTER_M']}x1" if c.get("CLUSTER_M", 1) > 1 else ""
        split = f" splitk{c['SPLIT_K']}" if c.get("SPLIT_K", 1) > 1 else ""
        return (f"{self.LABEL} {c['BM']}x{c['BN']}x{self.K_TILE} wg{c['WG']} {schedule} s{c['STAGES']} "
                f"g{c['GROUP_M']}{fold}{cluster}{split}")  # fmt: skip
