"""SIMT SGEMM: C = A·B on the fp32 cores (FFMA), any M, N, K (template: kernel_templates/gemm_simt.cu).

The tiling hierarchy is block tile (BM×BN, stepping BK along K) → warp tile (WM×WN, WARPS_M×WARPS_N warps per
block) → per-thread sub-tiles (WMITER×WNITER of them, each TM×TN). The search sees the warp *counts* rather than
the warp-tile sizes, so that the thread count (32·WARPS_M·WARPS_N ≤ 512) and the divisibility of the block tile
hold by construction, and most random proposals are valid.

Small M: block tiles of 16 and 32 rows. Split-K (``SPLIT_K``, a launch choice that needs no recompilation):
S > 1 slices of K run as the grid's z dimension into an fp32 workspace that a reduce kernel sums in a fixed
order (`autotune.spaces._gemm_splitk`): a 127-row GEMM has too few output tiles to fill the GPU otherwise.
"""

from __future__ import annotations

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._gemm_splitk import SplitKTiles, workspace_problems
from autotune.spaces.algorithm import smem_problems, thread_problems
from autotune.spaces.base import Config, Param, ceil_div

# PIPELINE value → (shared-memory stages, cp.async). "double" prefetches the next tile into registers.
PIPELINES = {
    "single": (1, 0),
    "double": (2, 0),
    "cp.async-2": (2, 1),
    "cp.async-3": (3, 1),
    "cp.async-4": (4, 1),
}

MAX_ACCUMULATORS = 128  # C elements per thread; beyond this ptxas spills on every kernel we tried
MAX_EST_REGISTERS = 232  # accumulators + fragments + staging registers, leaving room for addressing


class SimtGemm(SplitKTiles):
    name = "simt"
    template = "gemm_simt.cu"
    kernel = "sgemm"
    dtypes = ("float32",)

    parameters = (
        Param("BM", (16, 32, 64, 128, 256), "block tile rows"),
        Param("BN", (32, 64, 128, 256), "block tile columns"),
        Param("BK", (8, 16, 32), "block tile depth (K step)"),
        Param("WARPS_M", (1, 2, 4), "warps along M (warp tile WM = BM / WARPS_M)"),
        Param("WARPS_N", (1, 2, 4), "warps along N (warp tile WN = BN / WARPS_N)"),
        Param("TM", (2, 4, 8), "thread sub-tile rows"),
        Param("TN", (2, 4, 8), "thread sub-tile columns"),
        Param("WNITER", (1, 2, 4), "thread sub-tiles along N within the warp tile"),
        Param("VEC", (1, 2, 4), "global-load vector width (falls back to scalar where rows are unaligned)"),
        Param("A_TRANS", (0, 1), "store the A tile transposed in shared memory"),
        Param("A_PAD", (0, 4), "floats of padding per shared-memory row of A (bank conflicts)"),
        Param("PIPELINE", tuple(PIPELINES), "shared-memory staging: single, register-prefetch double, cp.async"),
        Param("GROUP_M", (1, 4, 8, 16), "block rasterisation: consecutive blocks sweep GROUP_M tile rows (L2)"),
        Param("MIN_BLOCKS", (1, 2), "occupancy hint to ptxas: registers capped so this many blocks fit an SM"),
        Param("SPLIT_K", (1, 2, 3, 4, 6, 8, 16), "K slices run in parallel (fp32 workspace + reduce); launch only"),
    )
    default_config = {
        "BM": 128, "BN": 128, "BK": 8, "WARPS_M": 2, "WARPS_N": 4, "TM": 4, "TN": 4, "WNITER": 2,
        "VEC": 4, "A_TRANS": 1, "A_PAD": 4, "PIPELINE": "double", "GROUP_M": 1, "MIN_BLOCKS": 1,
        "SPLIT_K": 1,
    }  # fmt: skip
    LAUNCH_ONLY = ("SPLIT_K",)  # parameters of the launch plan, not of the compiled kernel

    # --- derived geometry -----------------------------------------------------------------------------------
    @staticmethod
    def geometry(config: Config) -> dict[str, int]:
        """The template's derived macros (NT, WM, WN, WMITER, …); fractional values mean an invalid config."""
        wm = config["BM"] // config["WARPS_M"]
        wn = config["BN"] // config["WARPS_N"]
        accumulators = wm * wn // 32
        sub = config["TM"] * config["TN"] * config["WNITER"]
        wmiter = accumulators // sub if accumulators % sub == 0 else 0
        stages, use_async = PIPELINES[config["PIPELINE"]]
        bm, bn, bk, pad = config["BM"], config["BN"], config["BK"], config["A_PAD"]
        a_tile = bk * (bm + pad) if config["A_TRANS"] else bm * (bk + pad)
        return {
            "threads": 32 * config["WARPS_M"] * config["WARPS_N"],
            "WM": wm,
            "WN": wn,
            "accumulators": accumulators,
            "WMITER": wmiter,
            "stages": stages,
            "async": use_async,
            "smem_bytes": 4 * stages * (a_tile + bk * bn),
        }

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        g = self.geometry(config)
        tm, tn, wniter = config["TM"], config["TN"], config["WNITER"]
        problems = []
        if g["WM"] * g["WN"] < 32 * tm * tn * wniter or g["WMITER"] == 0:
            problems.append(
                f"warp tile {g['WM']}x{g['WN']} does not split into 32 threads x WNITER={wniter} sub-tiles of "
                f"{tm}x{tn}"
            )
        else:
            wsubm, wsubn = g["WM"] // g["WMITER"], g["WN"] // wniter
            if g["WM"] % g["WMITER"] or wsubm % tm or g["WN"] % wniter or wsubn % tn:
                problems.append(f"sub-tiles {wsubm}x{wsubn} are not multiples of the thread tile {tm}x{tn}")
            elif (wsubm // tm) * (wsubn // tn) != 32:
                problems.append("a warp's sub-tile does not map onto its 32 lanes")
        if g["accumulators"] > MAX_ACCUMULATORS:
            problems.append(f"{g['accumulators']} accumulators per thread (> {MAX_ACCUMULATORS}) would spill")
        staging = 0
        if config["PIPELINE"] == "double":
            chunks = (config["BM"] + config["BN"]) * config["BK"]
            staging = ceil_div(chunks // config["VEC"], g["threads"]) * config["VEC"]
        fragments = (g["WMITER"] or 1) * tm + wniter * tn
        if g["accumulators"] + fragments + staging > MAX_EST_REGISTERS:
            problems.append(
                f"about {g['accumulators'] + fragments + staging} live registers per thread (> {MAX_EST_REGISTERS})"
            )
        # __launch_bounds__(threads, MIN_BLOCKS) makes ptxas fit threads × MIN_BLOCKS blocks in the register file.
        cap = min(255, device.registers_per_multiprocessor // (g["threads"] * config["MIN_BLOCKS"]))
        if g["accumulators"] + fragments + 16 > cap:
            problems.append(
                f"{g['threads']} threads x {config['MIN_BLOCKS']} blocks cap registers at {cap}: would spill"
            )
        if config["MIN_BLOCKS"] > 1:
            if config["MIN_BLOCKS"] * g["smem_bytes"] > device.smem_per_multiprocessor:
                problems.append(f"MIN_BLOCKS={config['MIN_BLOCKS']} blocks do not fit the SM's shared memory")
        problems += thread_problems(g["threads"], device)
        problems += smem_problems(g["smem_bytes"], device)
        if g["async"] and device.compute_capability < (8, 0):
            problems.append(f"cp.async needs compute capability 8.0, device has {device.cc}")
        return problems + workspace_problems(config["SPLIT_K"], shape[0], shape[1])

    def defines(self, config: Config) -> dict[str, int | str]:
        stages, use_async = PIPELINES[config["PIPELINE"]]
        skip = ("PIPELINE", *self.LAUNCH_ONLY)
        out: dict[str, int | str] = {k: v for k, v in self.local(config).items() if k not in skip}
        out["STAGES"] = stages
        out["ASYNC"] = use_async
        return out

    def describe(self, config: Config) -> str:
        c = config
        return (
            f"simt {c['BM']}x{c['BN']}x{c['BK']} warps {c['WARPS_M']}x{c['WARPS_N']} thr {c['TM']}x{c['TN']}"
            f"/{c['WNITER']} vec{c['VEC']} {'At' if c['A_TRANS'] else 'A'}{'+pad' if c['A_PAD'] else ''} "
            f"{c['PIPELINE']} g{c['GROUP_M']} mb{c['MIN_BLOCKS']}"
            + (f" splitk{c['SPLIT_K']}" if c.get("SPLIT_K", 1) > 1 else "")
        )
