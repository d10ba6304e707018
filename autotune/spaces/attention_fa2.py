"""FlashAttention-2 forward on tensor cores (template: kernel_templates/attention_fa2.cu), float16 and bfloat16.

mma.sync m16n8k16 with fp32 accumulation for S = Q·Kᵀ and O = P·V; P is rounded to the input type between the
two (as FlashAttention-2 does), the softmax statistics stay in fp32. The search sees the warp count and the m16
tiles per warp, so the block's query rows BR = 16·MT·WARPS and the warp-to-row mapping hold by construction.
"""

from __future__ import annotations

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._attention import OnePassAttention, attention_dims
from autotune.spaces.algorithm import smem_problems, thread_problems
from autotune.spaces.base import Config, Param

MAX_TILE_REGISTERS = 136  # O + S + Q fragments per thread (the template's static_assert). ptxas, sm_90: ≤ 136
# compiles without spills (up to 254 registers), 160 spills.
SWIZZLE_DIMS = (64, 128)  # the XOR swizzle permutes 8 chunks of 16 bytes: rows of a multiple of 64 elements


class Fa2Attention(OnePassAttention):
    name = "fa2"
    template = "attention_fa2.cu"
    kernel = "attention_fa2"
    dtypes = ("float16", "bfloat16")
    min_cc = (8, 0)  # mma.sync bf16, ldmatrix, cp.async

    parameters = (
        Param("BC", (32, 64, 128), "keys per KV tile"),
        Param("WARPS", (4, 8), "warps per block"),
        Param("MT", (1, 2), "m16 query tiles per warp (BR = 16·MT·WARPS rows per block)"),
        Param("STAGES", (1, 2, 3), "depth of the K/V cp.async ring in shared memory"),
        Param("Q_REGS", (0, 1), "Q fragments kept in registers (1) or re-read from shared memory per tile (0)"),
        Param("SWIZZLE", (0, 1), "XOR-swizzled shared tiles (1, head_dim 64/128) or rows padded by 16 bytes (0)"),
        Param("REVERSE", (0, 1), "causal: launch the longest query blocks first"),
    )
    default_config = {"BC": 64, "WARPS": 4, "MT": 1, "STAGES": 2, "Q_REGS": 1, "SWIZZLE": 0, "REVERSE": 0}

    @staticmethod
    def geometry(config: Config, head_dim: int) -> dict[str, int]:
        br = 16 * config["MT"] * config["WARPS"]
        row = head_dim if config["SWIZZLE"] else head_dim + 8
        tile_registers = config["MT"] * (head_dim // 2 + config["BC"] // 2 + (head_dim // 4 if config["Q_REGS"] else 0))
        return {
            "BR": br,
            "threads": 32 * config["WARPS"],
            "smem_bytes": 2 * row * (br + 2 * config["STAGES"] * config["BC"]),
            "tile_registers": tile_registers,
        }

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        d = attention_dims(shape).d
        g = self.geometry(config, d)
        problems = []
        if g["tile_registers"] > MAX_TILE_REGISTERS:
            problems.append(f"{g['tile_registers']} registers of O, S and Q tiles per thread (> {MAX_TILE_REGISTERS}) "
                            "would spill")  # fmt: skip
        if config["SWIZZLE"] and d not in SWIZZLE_DIMS:
            problems.append(f"SWIZZLE needs head_dim 64 or 128, not {d}")
        if config["REVERSE"] and not self.space.causal:
            problems.append("REVERSE only matters for causal attention")
        problems += smem_problems(g["smem_bytes"], device)
        return problems + thread_problems(g["threads"], device)

    def describe(self, config: Config) -> str:
        c = self.local(config)
        return (
            f"fa2 BR={16 * c['MT'] * c['WARPS']} BC={c['BC']} warps={c['WARPS']} stages={c['STAGES']} "
            f"{'Qreg' if c['Q_REGS'] else 'Qsmem'} {'swz' if c['SWIZZLE'] else 'pad'}{' rev' if c['REVERSE'] else ''}"
        )
