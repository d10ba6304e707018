"""FlashAttention-3 style backward for Hopper (template: kernel_templates/attention_backward_fa3.cu, sm_90a only),
float16 and bfloat16, head_dim 64 and 128, multi-head and grouped-query attention: the family's rule default on
Hopper where it fits.
With dQ by fp32 atomics (the first version, docs/results/2026-11-26b/design_fa3_backward.md) it ran at about 0.58×
cuDNN at 4K tokens; with dQ reduced by the copy engine over the block's keys (``DQ_MODE`` 2, each head_dim's
default) at 0.92–1.07× (H200, 2026-11-29f).

Three launches, as fa2's atomic path: a prep pass (Δ = rowsum(dO∘O) and lse·log2(e) into fp32 workspaces padded
to SQr = seq_q rounded up to BM, the fp32 dQ accumulator zeroed), the main kernel (a block of 384 threads per 128
keys of one head: a producer warpgroup streams Q and dO tiles of BM rows by TMA with their statistics by bulk
copies; two consumer warpgroups of 64 keys run Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ, dV += Pᵀ·dO, dK += dSᵀ·Q and their 64 keys'
share of dQ = dS·K on wgmma, dQ added into the accumulator by fp32 atomics; or, by ``DQ_MODE``, staged in shared
memory and added by the copy engine's reduce-adds through a tensor map of the accumulator, off the consumers'
path: mode 1 as the atomics split it, mode 2 over the block's 128 keys after a barrier of both consumers, one
m64n64 piece each, half the traffic), and fa2's dQ store pass.

The copy engine reads q, k, v and do through the forward's 3-D tensor maps (head_dim, seq, batch·heads) with boxes
of 64 columns × a tile's rows (128-byte swizzle): q and do BM rows, k and v 128 rows.

Grouped-query attention (kv heads < heads, KV_GROUPED compiled in): a block per 128 keys of a kv head streams the
m_blocks of each query head of its group in turn, so dK and dV sum over the group in registers (grid (ceil(seq_kv /
128), HKV, B), the group size the kernel's last argument). ``BLOCK_ORDER`` 1 folds the heads and the batch into x,
the heads fastest: a causal mask's heaviest key blocks of every head are dispatched first.
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._attention import attention_dims, kv_args
from autotune.spaces.algorithm import Algorithm, smem_problems
from autotune.spaces.attention_backward_fa2 import STORE_THREADS
from autotune.spaces.base import (
    BufferSpec,
    Config,
    Launch,
    Param,
    Step,
    TensorMap,
    ceil_div,
)

HEAD_DIMS = (64, 128)
BN = 128  # keys per block: two consumer warpgroups of 64
THREADS = 384
BOX_COLUMNS = 64  # one 128-byte swizzle row of a 16-bit type: the boxes' inner extent
PREP_ROWS = 32  # rows per block of attention_bwd_fa3_prep (8 threads a row)
# Sᵀ and dPᵀ (BM/2 each), dK and dV (head_dim/2 each) fp32 registers per consumer thread (BM + head_dim): the
# template's static_assert. ptxas 13.0, sm_90a: 192 (head_dim 64 at BM 128, 128 at BM 64) compiles without spills
# under the consumers' 240 registers; 256 (head_dim 128 at BM 128) spills about 1 KB.
MAX_TILE_REGISTERS = 192
# The default per head_dim (the design's tiles): 128 query rows at head_dim 64, 64 at head_dim 128, dQ reduced by
# the copy engine over the block's keys (DQ_MODE 2: 1.4-1.8x the atomics of mode 0 on an H200, 2026-11-29f).
DEFAULTS = {64: {"BM": 128, "Q_STAGES": 2, "DO_STAGES": 2, "DQ_MODE": 2, "BLOCK_ORDER": 0},
            128: {"BM": 64, "Q_STAGES": 2, "DO_STAGES": 2, "DQ_MODE": 2, "BLOCK_ORDER": 0}}
# The template's own defaults, valid at both head dims (DQ_MODE 2 ties BM to the head_dim).
TEMPLATE_DEFAULTS = {"BM": 64, "Q_STAGES": 2, "DO_STAGES": 2, "DQ_MODE": 0, "BLOCK_ORDER": 0}
DQ_STAGE = 64 * 64 * 4  # DQ_MODE 1 and 2: a consumer's staged m64n64 fp32 piece of dQ


class Fa3AttentionBackward(Algorithm):
    name = "fa3"
    template = "attention_backward_fa3.cu"
    dtypes = ("float16", "bfloat16")
    min_cc = (9, 0)
    max_cc = (9, 0)  # sm_90a code (wgmma, setmaxnreg) runs on compute capability 9.0 alone

    parameters = (
        Param("BM", (64, 128), "query rows per streamed tile (the N of Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ)"),
        Param("Q_STAGES", (2, 3), "depth of the Q + lse ring"),
        Param("DO_STAGES", (1, 2), "depth of the dO + Δ ring"),
        Param("DQ_MODE", (0, 1, 2), "dQ added by fp32 atomics (0), or staged and added by TMA reduce-adds over each "
              "consumer's keys (1) or the block's (2)"),
        Param("BLOCK_ORDER", (0, 1), "blocks dispatched head by head (0), or key block by key block across every "
              "head (1: a causal mask's heaviest blocks first)"),
    )
    default_config = TEMPLATE_DEFAULTS  # `default_for` gives each head_dim its own

    @staticmethod
    def default_for(head_dim: int) -> Config:
        return dict(DEFAULTS[head_dim])

    @staticmethod
    def geometry(config: Config, head_dim: int) -> dict[str, int]:
        """The template's derived quantities: shared bytes of the main kernel, tile registers per consumer thread."""
        bm, qs, dos, mode = config["BM"], config["Q_STAGES"], config["DO_STAGES"], config["DQ_MODE"]
        ds_stages = 2 if mode == 2 else 1  # mode 2: the other consumer may still read the last m_block's dS
        panels = head_dim // BOX_COLUMNS
        kv_bytes, q_bytes = panels * BN * 128, panels * bm * 128
        barriers = 1 + 2 * qs + 2 * dos
        return {
            "smem_bytes": 1024 + 2 * kv_bytes + (qs + dos) * (q_bytes + 4 * bm) + 2 * ds_stages * bm * 128
            + 2 * DQ_STAGE * (mode > 0) + 8 * barriers,
            "tile_registers": bm + head_dim,
        }

    @staticmethod
    def padded_rows(config: Config, seq_q: int) -> int:
        """SQr: seq_q rounded up to a whole tile of BM rows (the statistics' padded length)."""
        return ceil_div(seq_q, config["BM"]) * config["BM"]

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        reason = super().unfit(shape, device)
        if reason is not None:
            return reason
        p = attention_dims(shape)
        if p.d not in HEAD_DIMS:
            return f"algorithm {self.name} supports head_dim {', '.join(map(str, HEAD_DIMS))}, not {p.d}"
        return None

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        d = attention_dims(shape).d
        g = self.geometry(config, d)
        problems = []
        if config["DO_STAGES"] > config["Q_STAGES"]:
            problems.append(f"DO_STAGES={config['DO_STAGES']} > Q_STAGES={config['Q_STAGES']}")
        if config["DQ_MODE"] == 2 and config["BM"] * d != 64 * 128:
            problems.append(f"DQ_MODE=2 gives each consumer one m64n64 piece of dQ: BM 64 at head_dim 128 or BM 128 at "
                            f"head_dim 64 (BM={config['BM']}, head_dim {d})")
        if config["BLOCK_ORDER"] and not self.space.causal:  # every key block as heavy: only L2 reuse would change
            problems.append("BLOCK_ORDER=1 only matters for causal attention (its heaviest key blocks first)")
        if g["tile_registers"] > MAX_TILE_REGISTERS:
            problems.append(f"{g['tile_registers']} registers of Sᵀ, dPᵀ, dK and dV tiles per thread "
                            f"(> {MAX_TILE_REGISTERS}) would spill")  # fmt: skip
        return problems + smem_problems(g["smem_bytes"], device)

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        p = attention_dims(shape)
        sqr = self.padded_rows(self.local(config), p.sq)
        stats = BufferSpec((p.b, p.h, sqr))
        return {"delta": stats, "lse2": stats, "dq_acc": BufferSpec((p.b, p.h, p.sq, p.d))}

    def tensor_maps(self, config: Config, shape: Shape) -> tuple[TensorMap, ...]:
        """q and do as (head_dim, seq_q, batch·heads) tensors in boxes of 64 columns × BM rows, k and v as
        (head_dim, seq_kv, batch·kv_heads) in boxes of 64 × 128."""
        b, h, hkv, sq, skv, d = attention_dims(shape)
        bm = config["BM"]
        rows = {"q": (sq, b * h, bm), "k": (skv, b * hkv, BN), "v": (skv, b * hkv, BN), "do": (sq, b * h, bm)}
        maps = tuple(TensorMap(name, self.dtype, dims=(d, n, heads), box=(BOX_COLUMNS, box, 1))
                     for name, (n, heads, box) in rows.items())  # fmt: skip
        if config["DQ_MODE"]:  # the accumulator, reduced into in boxes of 32 fp32 columns (128 bytes) × 64 rows
            maps += (TensorMap("dq_acc", "float32", dims=(d, sq, b * h), box=(32, 64, 1)),)
        return maps

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        p = attention_dims(shape)
        b, h, sq, skv, d = p.b, p.h, p.sq, p.skv, p.d
        c = self.local(config)
        g = self.geometry(c, d)
        rows = b * h * self.padded_rows(c, sq)
        scale = np.float32(d**-0.5)
        n = b * h * sq * d
        return [
            Launch("attention_bwd_fa3_prep", (ceil_div(rows, PREP_ROWS), 1, 1), (8 * PREP_ROWS, 1, 1), 0,
                   ("o", "do", "lse", "delta", "lse2", "dq_acc", np.int32(sq), np.int32(rows))),
            Launch("attention_bwd_fa3", self.grid(c, shape), (THREADS, 1, 1), g["smem_bytes"],
                   (*self.tensor_maps(c, shape), "lse2", "delta", "dk", "dv", "dq_acc", np.int32(sq), np.int32(skv),
                    np.float32(self.space.scale_log2(d)), scale, *kv_args(p))),
            Launch("attention_bwd_dq_store", (ceil_div(n, 8 * STORE_THREADS), 1, 1), (STORE_THREADS, 1, 1), 0,
                   ("dq_acc", "dq", np.int64(n), scale)),
        ]  # fmt: skip

    @staticmethod
    def grid(config: Config, shape: Shape) -> tuple[int, int, int]:
        """The main kernel's grid: a block per 128 keys of each kv head (the template's BLOCK_ORDER)."""
        p = attention_dims(shape)
        if config["BLOCK_ORDER"]:
            return (ceil_div(p.skv, BN) * p.b * p.hkv, 1, 1)
        return (ceil_div(p.skv, BN), p.hkv, p.b)

    def describe(self, config: Config) -> str:
        c = self.local(config)
        dq = ("atomic", "bulk", "bulk-block")[c["DQ_MODE"]]
        order = " keys-first" if c["BLOCK_ORDER"] else ""
        return f"fa3 BM={c['BM']} q{c['Q_STAGES']} do{c['DO_STAGES']} dq={dq}{order}"
