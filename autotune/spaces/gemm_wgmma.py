"""Hopper wgmma GEMM: C = A·B for float16 / bfloat16 with fp32 accumulation (template:
kernel_templates/gemm_wgmma.cu, sm_90a only).

A block of WG warpgroups computes a BM×BN tile, each warpgroup BM/WG rows in m64 slices with one m64nBNk16
wgmma per slice and k16 step, operands read by the tensor cores from 128-byte-swizzled shared memory; a
STAGES-deep cp.async ring along K (BK = 64, fixed: one swizzle row of 16-bit elements), filled either by every
thread between block barriers (WS = 0) or by a producer warpgroup signalling mbarriers (WS = 1).

Its code is built for sm_90a, which runs on compute capability 9.0 alone (H100, H200): ``min_cc`` and
``max_cc`` are both 9.0, so other devices reject it before anything is compiled.
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.algorithm import Algorithm, smem_problems
from autotune.spaces.base import Config, Launch, Param, Step, ceil_div

BK = 64
MAX_ACCUMULATORS = 128  # fp32 accumulators per thread (the template's static_assert): beyond, ptxas spills


class WgmmaGemm(Algorithm):
    name = "wgmma"
    template = "gemm_wgmma.cu"
    dtypes = ("float16", "bfloat16")
    min_cc = (9, 0)
    max_cc = (9, 0)

    parameters = (
        Param("BM", (64, 128, 256), "block tile rows (WG warpgroups × m64 slices)"),
        Param("BN", (64, 128, 256), "block tile columns: the wgmma N"),
        Param("WG", (1, 2), "warpgroups of 128 threads, splitting BM"),
        Param("STAGES", (3, 4, 5, 6), "shared-memory stages of the cp.async ring (one is held by the wgmma)"),
        Param("GROUP_M", (1, 8, 16), "block rasterisation: consecutive blocks sweep GROUP_M tile rows (L2)"),
        Param("WS", (0, 1), "warp specialisation: 1 adds a producer warpgroup (cp.async + mbarriers, setmaxnreg)"),
    )
    default_config = {"BM": 128, "BN": 256, "WG": 2, "STAGES": 4, "GROUP_M": 8, "WS": 0}

    @staticmethod
    def geometry(config: Config) -> dict[str, int]:
        """The template's derived quantities (threads, m64 slices per warpgroup, accumulators, shared bytes)."""
        bm, bn, wg = config["BM"], config["BN"], config["WG"]
        m_tiles = bm // (64 * wg) if bm % (64 * wg) == 0 else 0
        stage = (bm + bn) * BK * 2
        return {
            "threads": 128 * (wg + config["WS"]),
            "m_tiles": m_tiles,
            "accumulators": m_tiles * bn // 2,
            "smem_bytes": config["STAGES"] * stage + 1024 + 128,  # + slack to align the ring, + mbarriers
        }

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        g = self.geometry(config)
        problems = []
        if g["m_tiles"] == 0:
            problems.append(f"BM={config['BM']} does not split into m64 slices over {config['WG']} warpgroups")
        elif g["m_tiles"] > 2:  # BM=256 on one warpgroup: ptxas spills the copy addresses
            problems.append(f"{g['m_tiles']} m64 slices per warpgroup (> 2)")
        if g["accumulators"] > MAX_ACCUMULATORS:
            problems.append(f"{g['accumulators']} accumulators per thread (> {MAX_ACCUMULATORS}) would spill")
        return problems + smem_problems(g["smem_bytes"], device)

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n, k = shape
        g = self.geometry(config)
        blocks = ceil_div(m, config["BM"]) * ceil_div(n, config["BN"])
        return [
            Launch(
                kernel="gemm_wgmma",
                grid=(blocks, 1, 1),
                block=(g["threads"], 1, 1),
                shared_bytes=g["smem_bytes"],
                args=("A", "B", "C", np.int32(m), np.int32(n), np.int32(k)),
            )
        ]

    def describe(self, config: Config) -> str:
        c = config
        return f"wgmma {c['BM']}x{c['BN']}x{BK} wg{c['WG']}{'+p' if c['WS'] else ''} s{c['STAGES']} g{c['GROUP_M']}"
