"""FlashAttention-3 style forward for Hopper (template: kernel_templates/attention_fa3.cu, sm_90a only), float16
and bfloat16.

TMA copies Q once and K, V tiles of BN keys into STAGES-deep rings (one producer thread); one or two consumer
warpgroups of 64 query rows each run S = Q·Kᵀ on wgmma from shared memory, the online softmax in registers, and
O += P·V on wgmma with P in registers. Tunables: the key tile (BN), the ring depth (STAGES), the consumer
warpgroups (WG: BM = 64·WG query rows per block), their ping-pong on the tensor cores (PINGPONG, WG = 2), the
intra-warpgroup overlap of S[j+1] = Q·K[j+1]ᵀ with P[j]·V[j] (OVERLAP) and, causal only, the launch order
(REVERSE).

The copy engine reads q, k and v through 3-D tensor maps (head_dim, seq, batch·heads; k and v: batch·kv heads,
the kernel's third coordinate the kv head of its query head) with boxes of 64 × rows × 1
(128-byte swizzle): a box never reaches into the next head, rows past a sequence's end are zero-filled per head,
so ragged seq_q and seq_kv need only the kernel's key mask and store guards. Rows of head_dim 64, 96, 128 are
multiples of 16 bytes, as TMA requires; other head dims (32) are left to fa2 (`unfit`).
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._attention import attention_dims, kv_args
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import Config, Launch, Param, Step, TensorMap, ceil_div

HEAD_DIMS = (64, 96, 128)
BOX_COLUMNS = 64  # one 128-byte swizzle row of a 16-bit type: the boxes' inner extent
# S (BN/2), O (the padded head_dim / 2) and, with OVERLAP, P (BN/4: the next S is computed while P·V reads it)
# registers per consumer thread: the template's static_assert. Measured with ptxas 13.0 (sm_90a, BN 64..256 by 16,
# head_dim 64/96/128, WG 1 and 2, OVERLAP, causal or not): up to 212 compiles without spills under the consumers'
# 240 registers, 220 and above spill (and serialise the wgmma: C7512). Without OVERLAP nothing up to BN 256 spills.
MAX_TILE_REGISTERS = 212


class Fa3Attention(Algorithm):
    name = "fa3"
    template = "attention_fa3.cu"
    dtypes = ("float16", "bfloat16")
    min_cc = (9, 0)
    max_cc = (9, 0)  # sm_90a code (wgmma, setmaxnreg) runs on compute capability 9.0 alone

    parameters = (
        Param("BN", (64, 96, 128, 144, 160, 176, 192, 224, 256), "keys per K/V tile (the N of S = Q·Kᵀ)"),
        Param("STAGES", (2, 3, 4), "depth of the K and V TMA rings"),
        Param("WG", (1, 2), "consumer warpgroups of 64 query rows (BM = 64·WG rows per block)"),
        Param("PINGPONG", (0, 1), "two consumers take turns issuing their GEMMs (one's softmax hides the other's)"),
        Param("OVERLAP", (0, 1), "S[j+1] = Q·K[j+1]ᵀ issued with P[j]·V[j], softmax while P·V runs"),
        Param("REVERSE", (0, 1), "causal: launch the longest query blocks first"),
    )
    default_config = {"BN": 128, "STAGES": 2, "WG": 2, "PINGPONG": 1, "OVERLAP": 1, "REVERSE": 0}

    @staticmethod
    def geometry(config: Config, head_dim: int) -> dict[str, int]:
        """The template's derived quantities: rows per block, threads, shared bytes, tile registers."""
        bm, bn, stages = 64 * config["WG"], config["BN"], config["STAGES"]
        padded = BOX_COLUMNS * ceil_div(head_dim, BOX_COLUMNS)  # head_dim 96: two boxes, the second half empty
        return {
            "BM": bm,
            "threads": 128 * (config["WG"] + 1),
            "smem_bytes": 1024 + 2 * padded * (bm + 2 * stages * bn) + 8 * (1 + 4 * stages),
            "tile_registers": bn // 2 + (bn // 4 if config["OVERLAP"] else 0) + padded // 2,
        }

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        reason = super().unfit(shape, device)
        if reason is not None:
            return reason
        d = attention_dims(shape).d
        if d not in HEAD_DIMS:
            return f"algorithm {self.name} supports head_dim {', '.join(map(str, HEAD_DIMS))}, not {d}"
        return None

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        g = self.geometry(config, attention_dims(shape).d)
        problems = []
        if config["PINGPONG"] and config["WG"] != 2:
            problems.append("ping-pong needs two consumer warpgroups (WG=2)")
        if config["REVERSE"] and not self.space.causal:
            problems.append("REVERSE only matters for causal attention")
        if g["tile_registers"] > MAX_TILE_REGISTERS:
            problems.append(f"{g['tile_registers']} registers of S, P and O tiles per thread (> {MAX_TILE_REGISTERS}) "
                            "would spill")  # fmt: skip
        if g["smem_bytes"] > device.smem_per_block_optin:
            problems.append(f"{g['smem_bytes']} B of shared memory > device limit {device.smem_per_block_optin} B")
        return problems

    def tensor_maps(self, config: Config, shape: Shape) -> tuple[TensorMap, TensorMap, TensorMap]:
        """q as a (head_dim, seq_q, batch·heads) tensor, k and v as (head_dim, seq_kv, batch·kv_heads), copied in
        boxes of 64 columns × a tile's rows."""
        b, h, hkv, sq, skv, d = attention_dims(shape)
        bm, bn = 64 * config["WG"], config["BN"]
        return (
            TensorMap("q", self.dtype, dims=(d, sq, b * h), box=(BOX_COLUMNS, bm, 1)),
            TensorMap("k", self.dtype, dims=(d, skv, b * hkv), box=(BOX_COLUMNS, bn, 1)),
            TensorMap("v", self.dtype, dims=(d, skv, b * hkv), box=(BOX_COLUMNS, bn, 1)),
        )

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        p = attention_dims(shape)
        b, h, sq, skv, d = p.b, p.h, p.sq, p.skv, p.d
        c = self.local(config)
        g = self.geometry(c, d)
        return [
            Launch(
                kernel="attention_fa3",
                grid=(ceil_div(sq, g["BM"]), h, b),
                block=(g["threads"], 1, 1),
                shared_bytes=g["smem_bytes"],
                args=(*self.tensor_maps(c, shape), "o", "lse", np.int32(sq), np.int32(skv),
                      np.float32(self.space.scale_log2(d)), *kv_args(p)),  # fmt: skip
            )
        ]

    def describe(self, config: Config) -> str:
        c = self.local(config)
        schedule = "pingpong" if c["PINGPONG"] else ("coop" if c["WG"] == 2 else "wg1")
        return (f"fa3 BM={64 * c['WG']} BN={c['BN']} s{c['STAGES']} {schedule}"
                f"{' overlap' if c['OVERLAP'] else ''}{' rev' if c['REVERSE'] else ''}")  # fmt: skip
