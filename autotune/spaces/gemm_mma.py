"""Tensor-core HGEMM: C = A·B in float16 or bfloat16, fp32 accumulation, any M, N, K (template:
kernel_templates/gemm_mma.cu).

``mma.sync.aligned.m16n8k16`` fed by ``ldmatrix`` from a multistage ``cp.async`` pipeline (sm_80+). The tiling
is block tile (BM×BN, stepping BK) → warp tile (WM×WN, (BM/WM)·(BN/WN) warps) → 16×8 mma tiles. SPLIT_K > 1
spreads K over gridDim.z blocks that write fp32 partial tiles to a workspace, summed (in a fixed order) by
``gemm_splitk_reduce`` (`autotune.spaces._gemm_splitk`): thin problems such as 127×4096×4096 then fill the GPU.

The constraints mirror the template's static_asserts (tile divisibility, warp-tile granularity, accumulator
count, thread count) and add the device's limits: shared memory and a register estimate that keeps ptxas from
spilling (calibrated on sm_90 compiles: see tests/test_spaces_gemm_mma.py).
"""

from __future__ import annotations

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._gemm_splitk import SplitKTiles
from autotune.spaces.algorithm import smem_problems
from autotune.spaces.base import Config, Param, ceil_div

ELEMENT_BYTES = 2  # float16 and bfloat16
MAX_ACCUMULATORS = 128  # fp32 accumulators per thread (the template's static_assert: WM·WN ≤ 4096)
# Registers besides accumulators and fragments: ptxas keeps an address per global chunk a thread copies per stage
# (2 each) and per ldmatrix of a stage (1 each) live across the K loop, plus about 36 more (indices, bounds,
# loop state); a second fragment set costs three times its own registers (ptxas hoists more ldmatrix then).
# Calibrated on sm_90a compiles of random configurations (128x256x32 with 64x64 warp tiles: 252 registers,
# unspilled, 251 with BK = 64; with a second fragment set it spills).
BASE_REGISTERS = 36
MAX_CHUNKS_PER_THREAD = 12  # 16-byte copies per thread per stage: beyond, too few threads for the tile (spills)


class MmaGemm(SplitKTiles):
    name = "mma"
    template = "gemm_mma.cu"
    kernel = "gemm_mma"
    dtypes = ("float16", "bfloat16")
    min_cc = (8, 0)

    parameters = (
        Param("BM", (16, 32, 64, 128, 256), "block tile rows"),
        Param("BN", (32, 64, 128, 256), "block tile columns"),
        Param("BK", (32, 64), "block tile depth (K step): 2 or 4 mma k-steps"),
        Param("WM", (16, 32, 64, 128), "warp tile rows (multiple of the mma's 16)"),
        Param("WN", (16, 32, 64, 128), "warp tile columns (multiple of ldmatrix.x4.trans's 16)"),
        Param("STAGES", (2, 3, 4, 5), "cp.async pipeline depth"),
        Param("SWIZZLE", (0, 1), "shared-memory layout: 1 XOR-swizzled chunks, 0 rows padded by 16 bytes"),
        Param("DOUBLE_FRAGS", (0, 1), "two fragment register sets: the next k-step's ldmatrix overlaps the mmas"),
        Param("SPLIT_K", (1, 2, 3, 4, 6, 8), "K split over this many blocks, fp32 partials reduced after"),
        Param("GROUP_M", (1, 4, 8, 16), "block rasterisation: consecutive blocks sweep GROUP_M tile rows (L2)"),
        Param("MIN_BLOCKS", (1, 2), "occupancy hint to ptxas: registers capped so this many blocks fit an SM"),
    )
    default_config = {
        "BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4, "SWIZZLE": 1, "DOUBLE_FRAGS": 0,
        "SPLIT_K": 1, "GROUP_M": 8, "MIN_BLOCKS": 1,
    }  # fmt: skip

    # --- derived geometry -----------------------------------------------------------------------------------
    @staticmethod
    def geometry(config: Config) -> dict[str, int]:
        """Threads, per-thread accumulators and fragment registers, shared memory of a configuration."""
        bm, bn, bk, wm, wn = (config[k] for k in ("BM", "BN", "BK", "WM", "WN"))
        warps = (bm // wm) * (bn // wn) if bm % wm == 0 and bn % wn == 0 else 0
        pad = 0 if config["SWIZZLE"] else 8
        stage = bm * (bk + pad) + bk * (bn + pad)
        fragments = wm // 4 + wn // 4  # A: (WM/16)·4 registers, B: (WN/8)·2
        threads = 32 * warps
        chunks = ceil_div(bm * bk // 8, threads) + ceil_div(bk * bn // 8, threads) if threads else 0
        return {
            "threads": threads,
            "accumulators": wm * wn // 32,
            "fragment_registers": fragments * (4 if config["DOUBLE_FRAGS"] else 1),  # see BASE_REGISTERS
            "chunks_per_thread": chunks,
            "address_registers": 2 * chunks + (bk // 16) * (wm // 16 + wn // 16),
            "smem_bytes": ELEMENT_BYTES * config["STAGES"] * stage,
        }

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        g = self.geometry(config)
        bm, bn, wm, wn = config["BM"], config["BN"], config["WM"], config["WN"]
        problems = []
        if g["threads"] == 0:
            problems.append(f"block tile {bm}x{bn} does not split into warp tiles {wm}x{wn}")
            return problems
        if g["accumulators"] > MAX_ACCUMULATORS:
            problems.append(f"warp tile {wm}x{wn}: {g['accumulators']} accumulators per thread (> {MAX_ACCUMULATORS})")
        if g["threads"] > min(1024, device.max_threads_per_block):
            problems.append(f"{g['threads']} threads per block > limit {min(1024, device.max_threads_per_block)}")
        if g["chunks_per_thread"] > MAX_CHUNKS_PER_THREAD:
            problems.append(
                f"{g['threads']} threads copy {g['chunks_per_thread']} chunks each per stage "
                f"(> {MAX_CHUNKS_PER_THREAD}): too few threads for the tile"
            )
        # __launch_bounds__(threads, MIN_BLOCKS): ptxas may use 65536 / (threads · MIN_BLOCKS) registers (≤ 255).
        blocks = config["MIN_BLOCKS"]
        cap = min(255, device.registers_per_multiprocessor // (g["threads"] * blocks) // 8 * 8)
        # Two fragment sets over more k-steps keep more ldmatrix results in flight (BK = 64 doubles them).
        fragments = g["fragment_registers"] * (config["BK"] // 32 if config["DOUBLE_FRAGS"] else 1)
        need = g["accumulators"] + fragments + g["address_registers"] + BASE_REGISTERS
        if need > cap:
            what = f"{blocks} blocks of {g['threads']} threads" if blocks > 1 else f"{g['threads']} threads"
            problems.append(f"about {need} registers per thread > {cap} for {what}: would spill")
        if blocks > 1 and blocks * (g["smem_bytes"] + 1024) > device.smem_per_multiprocessor:
            problems.append(f"MIN_BLOCKS={blocks} blocks of {g['smem_bytes']} B do not fit the SM's shared memory")
        return problems + smem_problems(g["smem_bytes"], device)

    def describe(self, config: Config) -> str:
        c = config
        return (
            f"mma {c['BM']}x{c['BN']}x{c['BK']} warp {c['WM']}x{c['WN']} s{c['STAGES']} "
            f"{'swz' if c['SWIZZLE'] else 'pad'}{' dfrag' if c['DOUBLE_FRAGS'] else ''} "
            f"splitk{c['SPLIT_K']} g{c['GROUP_M']} mb{c['MIN_BLOCKS']}"
        )
