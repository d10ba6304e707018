"""GEMM on tensor cores with TF32 operands (template: kernel_templates/gemm_tf32x3.cu), mma.sync m16n8k8.

* `Tf32x3Gemm` (``tf32x3``, answers float32 ``gemm``): each operand split into a TF32 big part and a TF32
  remainder, big·big + big·small + small·big accumulated in fp32, the mma accumulator folded into a second fp32
  accumulator outside the tensor core: each k-step's three mma start from zero and are added with FADD (the
  tensor core's own accumulation truncates), into a level-1 sum folded into the total every FOLD k-tiles.
  Its error stays within the SIMT kernel's on uniform and wide-range inputs (the family's contract).
* `Tf32Gemm` (``tf32``, only in the separate ``gemm_tf32`` family): big·big alone, ~1e-4 relative error. It is
  not fp32 and never answers an fp32 ``gemm`` request.

Tiling: block tile BM×BN stepping BK along K, WARPS_M×WARPS_N warps each owning a (BM/WARPS_M)×(BN/WARPS_N) warp
tile of m16n8 mma tiles; a STAGES-deep cp.async ring of padded shared tiles (conflict-free ldmatrix for A and
vector loads for B). Split-K (``SPLIT_K``, a launch choice: no recompilation) runs S slices of K as the grid's z
dimension into an fp32 workspace summed in a fixed order (`autotune.spaces._gemm_splitk`), for shapes with too
few output tiles to fill the GPU (127×4096×4096). The constraints mirror the template's static_asserts, and
estimate registers so that what is proposed does not spill.
"""

from __future__ import annotations

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._gemm_splitk import SplitKTiles, splits_of, workspace_problems
from autotune.spaces.algorithm import Algorithm, thread_problems
from autotune.spaces.base import Config, Param, ceil_div

FOLD_SPAN = 128  # at most this many K elements per level-1 window (template: FOLD·BK ≤ 128)
# Registers besides accumulators and one k-step's fragments: the next k-step's fragments (ptxas preloads them),
# addresses and loop state. Fitted to ptxas on sm_90 (default tf32x3 config: 224 registers, estimate 232).
REGISTER_OVERHEAD = 56
DEEP_TILE_REGISTERS = 24  # BK = 64: ptxas keeps more fragments live (the default tile spills 48 B at BK = 64)
BLOCK_SMEM_RESERVED = 1024  # shared memory the system reserves per block on sm_80+


class Tf32x3Gemm(SplitKTiles):
    name = "tf32x3"
    template = "gemm_tf32x3.cu"
    kernel = "gemm_tf32"
    dtypes = ("float32",)
    min_cc = (8, 0)  # mma.sync tf32, cp.async
    compensate = 1  # the template's COMPENSATE

    parameters = (
        Param("BM", (32, 64, 128, 256), "block tile rows"),
        Param("BN", (32, 64, 128, 256), "block tile columns"),
        Param("BK", (16, 32, 64), "block tile depth (K step), a multiple of the mma K (8)"),
        Param("WARPS_M", (1, 2, 4), "warps along M (warp tile BM / WARPS_M, a multiple of 16)"),
        Param("WARPS_N", (1, 2, 4), "warps along N (warp tile BN / WARPS_N, a multiple of 8)"),
        Param("STAGES", (2, 3, 4, 5), "cp.async ring depth"),
        Param("FOLD", (1, 2, 4), "k-tiles per level-1 window of the FADD accumulation (then added to the total)"),
        Param("GROUP_M", (1, 4, 8, 16), "block rasterisation: consecutive blocks sweep GROUP_M tile rows (L2)"),
        Param("MIN_BLOCKS", (1, 2), "occupancy hint to ptxas: registers capped so this many blocks fit an SM"),
        Param("SPLIT_K", (1, 2, 3, 4, 6, 8, 16), "K slices run in parallel (fp32 workspace + reduce); launch only"),
    )
    default_config = {
        "BM": 128, "BN": 128, "BK": 32, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 4, "FOLD": 4, "GROUP_M": 8,
        "MIN_BLOCKS": 1, "SPLIT_K": 1,
    }  # fmt: skip
    LAUNCH_ONLY = ("SPLIT_K",)  # parameters of the launch plan, not of the compiled kernel

    def fold(self, config: Config) -> int:
        return config["FOLD"]

    # --- derived geometry -----------------------------------------------------------------------------------
    def geometry(self, config: Config) -> dict[str, int]:
        """The template's derived sizes (warp tile, mma tiles per warp, shared memory, estimated registers)."""
        bm, bn, bk = config["BM"], config["BN"], config["BK"]
        wm, wn = bm // config["WARPS_M"], bn // config["WARPS_N"]
        mi, ni = wm // 16, wn // 8
        levels = 2 if self.fold(config) else 1
        # accumulators (per level) + A fragment big/small (8 per mma row tile) + B fragments (4 per column tile)
        registers = levels * 4 * mi * ni + 8 * mi + 4 * ni + REGISTER_OVERHEAD
        if bk >= 64:
            registers += DEEP_TILE_REGISTERS
        # cp.async source addresses the compiler keeps per chunk a thread copies (64-bit: two registers each)
        registers += 2 * ceil_div(bm * bk + bk * bn, 4 * 32 * config["WARPS_M"] * config["WARPS_N"])
        if levels == 2 and bk != 32:
            registers += 2 * mi * ni  # per-k-step partials kept live across more or fewer k-steps (ptxas)
        return {
            "threads": 32 * config["WARPS_M"] * config["WARPS_N"],
            "WM": wm,
            "WN": wn,
            "MI": mi,
            "NI": ni,
            "registers": registers,
            "smem_bytes": 4 * config["STAGES"] * (bm * (bk + 4) + bk * (bn + 8)),
        }

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        g = self.geometry(config)
        problems = []
        if g["WM"] % 16 or g["WN"] % 8 or g["MI"] == 0 or g["NI"] == 0:
            problems.append(f"warp tile {g['WM']}x{g['WN']} is not a whole number of 16x8 mma tiles")
        elif g["NI"] not in (1, 2, 4):
            problems.append(f"{g['NI']} mma tiles along N: must be 1, 2 or 4 (wider warp tiles spill)")
        fold = self.fold(config)
        if self.compensate and fold * config["BK"] > FOLD_SPAN:
            problems.append(
                f"FOLD={fold} x BK={config['BK']} > {FOLD_SPAN}: a level-1 window longer than {FOLD_SPAN} elements of K"
            )
        cap = min(255, device.registers_per_multiprocessor // (g["threads"] * config["MIN_BLOCKS"]))
        if g["registers"] > cap:
            problems.append(
                f"about {g['registers']} registers per thread > {cap} ({g['threads']} threads x "
                f"{config['MIN_BLOCKS']} blocks per SM): would spill"
            )
        problems += thread_problems(g["threads"], device)
        if g["smem_bytes"] > device.smem_per_block_optin:
            problems.append(f"{g['smem_bytes']} B of shared memory > device limit {device.smem_per_block_optin} B")
        elif config["MIN_BLOCKS"] * (g["smem_bytes"] + BLOCK_SMEM_RESERVED) > device.smem_per_multiprocessor:
            problems.append(f"MIN_BLOCKS={config['MIN_BLOCKS']} blocks do not fit the SM's shared memory")
        return problems + workspace_problems(splits_of(config), shape[0], shape[1])

    def compiled(self, config: Config) -> dict[str, int | str]:
        """The defines of the compiled kernel: the parameters less the launch-only ones, and DTYPE."""
        return {k: v for k, v in Algorithm.defines(self, config).items() if k not in self.LAUNCH_ONLY}

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**self.compiled(config), "COMPENSATE": self.compensate}

    def describe(self, config: Config) -> str:
        c = config
        fold = f" fold{self.fold(c)}" if self.compensate else ""
        split = f" splitk{c['SPLIT_K']}" if c.get("SPLIT_K", 1) > 1 else ""
        return (
            f"{self.name} {c['BM']}x{c['BN']}x{c['BK']} warps {c['WARPS_M']}x{c['WARPS_N']} {c['STAGES']}st"
            f"{fold} g{c['GROUP_M']} mb{c['MIN_BLOCKS']}{split}"
        )


class Tf32Gemm(Tf32x3Gemm):
    """1×TF32: the same template without the compensation (gemm_tf32.cu sets COMPENSATE=0 and FOLD=0 and
    includes it). Its family is ``gemm_tf32``."""

    name = "tf32"
    template = "gemm_tf32.cu"
    compensate = 0
    parameters = tuple(p for p in Tf32x3Gemm.parameters if p.name != "FOLD")
    default_config = {k: v for k, v in Tf32x3Gemm.default_config.items() if k != "FOLD"}

    def fold(self, config: Config) -> int:
        return 0

    def defines(self, config: Config) -> dict[str, int | str]:
        return self.compiled(config)  # COMPENSATE and FOLD are the wrapper template's
