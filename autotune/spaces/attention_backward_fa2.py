"""FlashAttention-2 backward on tensor cores (template: kernel_templates/attention_backward.cu), float16 and bfloat16.

Three or four launches: Δ = rowsum(dO∘O) (and the fp32 dQ accumulator zeroed), then dK and dV by key blocks (each
block's keys stay put while the query tiles stream past; Sᵀ, Pᵀ, dPᵀ, dSᵀ in registers, P and dS rounded to the
input type for the products that take them, every sum in fp32), then dQ: either added by fp32 atomics from the
key-block kernel and converted by a last pass (``DQ_ATOMIC=1``), or computed by its own query-block pass that
recomputes S, P, dP and dS (``DQ_ATOMIC=0``: two more products, no atomics).

A warp owns 16·MT keys (MT = BC / (16·WARPS), 1 or 2), so the block's BC keys and the warp-to-key mapping hold by
construction; the search sees BC and WARPS and the constraint keeps MT whole.

Grouped-query attention: dK and dV of a kv head sum over its group's G query heads. A dK/dV block owns BC keys of
one kv head and walks the query tiles of each query head of the group in turn, accumulating in the same registers
(grid (ceil(seq_kv / BC), HKV, B)): no fp32 workspace, no atomics, no reduction pass, the sum in a fixed order
(deterministic), and for G = 1 the kernel and grid of multi-head attention. The price is G times fewer, G times
longer blocks; rather than a reduction over per-query-head partials (G·B·HKV·seq_kv·head_dim fp32 of workspace
written, then read), which the search could weigh only at the cost of a second code path.
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._attention import attention_dims, kv_args
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.attention_fa2 import SWIZZLE_DIMS
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step, ceil_div

# dK, dV, Sᵀ and dPᵀ fragments per thread (MT·(head_dim + BR)): the template's static_assert. Measured with ptxas
# 13.0 for sm_80 and sm_90a over every head_dim, BC, WARPS and BR within these bounds, both DQ_ATOMIC, with STAGES
# 1 and 3, SWIZZLE, bf16 and non-causal varied one at a time (780 compiles): none spills (the heaviest use 255
# registers); 192 spills (two warps, or BR 64 at head_dim ≥ 64), and two warps spill at 160 (head_dim 96, BR 64).
MAX_TILE_REGISTERS = 160
MAX_TILE_REGISTERS_2_WARPS = 144
PREP_ROWS = 32  # rows per block of attention_bwd_prep (8 threads a row)
STORE_THREADS = 256  # attention_bwd_dq_store: 8 elements a thread


class Fa2AttentionBackward(Algorithm):
    name = "fa2"
    template = "attention_backward.cu"
    dtypes = ("float16", "bfloat16")
    min_cc = (8, 0)  # mma.sync bf16, ldmatrix, cp.async

    parameters = (
        Param("BC", (32, 64, 128), "keys per block of the dK/dV kernel (query rows per block of the dQ pass)"),
        Param("WARPS", (2, 4, 8), "warps per block, 16·MT keys each (MT = BC / (16·WARPS), 1 or 2)"),
        Param("BR", (16, 32, 64), "query rows per tile of the dK/dV kernel (keys per tile of the dQ pass)"),
        Param("STAGES", (1, 2, 3), "depth of the cp.async ring of the streamed tiles"),
        Param("DQ_ATOMIC", (1, 0), "dQ: 1 fp32 atomics from the dK/dV kernel, then a store pass; 0 its own pass"),
        Param("SWIZZLE", (0, 1), "XOR-swizzled shared tiles (1, head_dim 64/128) or rows padded by 16 bytes (0)"),
    )
    default_config = {"BC": 128, "WARPS": 8, "BR": 32, "STAGES": 2, "DQ_ATOMIC": 1, "SWIZZLE": 0}

    @staticmethod
    def geometry(config: Config, head_dim: int) -> dict[str, int]:
        """Keys per warp (MT), threads, shared memory of each kernel, register tiles per thread."""
        bc, br, stages = config["BC"], config["BR"], config["STAGES"]
        mt = bc // (16 * config["WARPS"])
        row = 2 * (head_dim if config["SWIZZLE"] else head_dim + 8)  # bytes per shared row
        ds_tile = bc * (br + 8) * 2 if config["DQ_ATOMIC"] else 0
        return {
            "MT": mt,
            "threads": 32 * config["WARPS"],
            "dkdv_smem": 2 * bc * row + stages * (2 * br * row + 2 * br * 4) + ds_tile,
            "dq_smem": 2 * bc * row + stages * 2 * br * row,
            "tile_registers": mt * (head_dim + br),
        }

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        d = attention_dims(shape).d
        problems = []
        if config["BC"] % (16 * config["WARPS"]) or config["BC"] > 32 * config["WARPS"]:
            return [f"BC={config['BC']} is not 16 or 32 keys per warp of {config['WARPS']} warps"]
        g = self.geometry(config, d)
        limit = MAX_TILE_REGISTERS_2_WARPS if config["WARPS"] == 2 else MAX_TILE_REGISTERS
        if g["tile_registers"] > limit:
            problems.append(f"{g['tile_registers']} registers of dK, dV, S and dP tiles per thread (> {limit}) would "
                            "spill")  # fmt: skip
        if config["SWIZZLE"] and d not in SWIZZLE_DIMS:
            problems.append(f"SWIZZLE needs head_dim 64 or 128, not {d}")
        smem = max(g["dkdv_smem"], 0 if config["DQ_ATOMIC"] else g["dq_smem"])
        if smem > device.smem_per_block_optin:
            problems.append(f"{smem} B of shared memory > device limit {device.smem_per_block_optin} B")
        if g["threads"] > device.max_threads_per_block:
            problems.append(f"{g['threads']} threads per block > device limit {device.max_threads_per_block}")
        return problems

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        b, h, hkv, sq, skv, d = attention_dims(shape)
        space = {"delta": BufferSpec((b, h, sq))}
        if config["DQ_ATOMIC"]:
            space["dq_acc"] = BufferSpec((b, h, sq, d))
        return space

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        p = attention_dims(shape)
        b, h, sq, skv, d = p.b, p.h, p.sq, p.skv, p.d
        g = self.geometry(config, d)
        block = (g["threads"], 1, 1)
        atomic = config["DQ_ATOMIC"]
        dq_acc = "dq_acc" if atomic else "delta"  # a buffer the kernels never touch under DQ_ATOMIC=0
        sizes = (np.int32(sq), np.int32(skv), np.float32(self.space.scale_log2(d)), np.float32(d**-0.5), *kv_args(p))
        rows = b * h * sq
        steps: list[Step] = [
            Launch("attention_bwd_prep", (ceil_div(rows, PREP_ROWS), 1, 1), (8 * PREP_ROWS, 1, 1), 0,
                   ("o", "do", "delta", dq_acc, np.int32(rows))),
            Launch("attention_bwd_dkdv", (ceil_div(skv, config["BC"]), p.hkv, b), block, g["dkdv_smem"],
                   ("q", "k", "v", "do", "lse", "delta", "dk", "dv", dq_acc, *sizes)),
        ]  # fmt: skip
        if atomic:
            n = rows * d
            steps.append(Launch("attention_bwd_dq_store", (ceil_div(n, 8 * STORE_THREADS), 1, 1),
                                (STORE_THREADS, 1, 1), 0, ("dq_acc", "dq", np.int64(n), sizes[3])))  # fmt: skip
        else:
            steps.append(Launch("attention_bwd_dq", (ceil_div(sq, config["BC"]), h, b), block, g["dq_smem"],
                                ("q", "k", "v", "do", "lse", "delta", "dq", *sizes)))  # fmt: skip
        return steps

    def describe(self, config: Config) -> str:
        c = self.local(config)
        return (
            f"fa2 BC={c['BC']} BR={c['BR']} warps={c['WARPS']} stages={c['STAGES']} "
            f"dq={'atomic' if c['DQ_ATOMIC'] else 'pass'} {'swz' if c['SWIZZLE'] else 'pad'}"
        )
