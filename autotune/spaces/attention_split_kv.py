"""Split-KV attention for decoding (template: kernel_templates/attention_split_kv.cu), float16 and bfloat16.

Short queries (seq_q ≤ `MAX_SEQ_Q`) over a long KV sequence: the KV tiles are split SPLITS ways so that
B·H·ceil(seq_q/16)·SPLITS blocks fill the GPU; each block's warps interleave over its split's tiles (mma.sync,
online softmax, as FlashAttention-2) and merge into one normalised fp32 (O, LSE) per split in the workspace; a
second kernel combines the splits by their log-sum-exp. Or (``COMBINE`` 1, Hopper, 2 to 16 splits) a query tile's
splits are one thread block cluster that combines them through distributed shared memory: no workspace, one launch
(16 is past the portable cluster size: the driver layer opts the kernel in, and a cluster must fit in one GPC).

Grouped-query attention: a block's 16 query rows are drawn from every query head of one kv head's group (the
group's G·seq_q rows of q are contiguous: (b, kv·G + j, i) is row j·seq_q + i of kv head (b, kv)), so one K/V
tile read serves the whole group: a multi-query decoding step of 8 heads reads K and V once instead of eight times,
and fills 8 of the mma's 16 rows instead of 1. Never more blocks or K/V traffic than a block per query head:
B·HKV·ceil(G·seq_q / 16) ≤ B·H·ceil(seq_q / 16) tiles. So it is not a tunable; SPLITS spreads the fewer tiles.
Multi-head attention (G = 1) is the same kernel with rows of one head, as before.
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._attention import attention_dims, kv_args
from autotune.spaces.algorithm import Algorithm, smem_problems
from autotune.spaces.attention_fa2 import SWIZZLE_DIMS
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step, ceil_div

MAX_SEQ_Q = 64  # beyond this the one-pass kernel has blocks enough
MAX_CLUSTER = 16  # COMBINE=1: the splits of a query tile are one cluster (16: sm_90's non-portable size)
BLOCKS_PER_SM = 8  # more blocks than this many per SM add no parallelism, only partial results to combine
# The rule's cluster combine (COMBINE=1): at most this many splits, each of at most this many keys.
RULE_CLUSTER_SPLITS, RULE_CLUSTER_KEYS_PER_SPLIT = 8, 2048
# O + S (weighed twice: the scores and their packed P live together) + Q fragments; the template's static_assert.
# Measured with ptxas (sm_90): 128 compiles without spills at every WARPS and STAGES, 160 and 176 spill.
MAX_TILE_REGISTERS = 128


class SplitKvAttention(Algorithm):
    name = "split_kv"
    template = "attention_split_kv.cu"
    dtypes = ("float16", "bfloat16")
    min_cc = (8, 0)

    parameters = (
        Param("SPLITS", (1, 2, 4, 8, 16, 32, 64, 128), "KV splits (partial results combined by their LSE)"),
        Param("WARPS", (1, 2, 4, 8), "warps per block, interleaved over the split's KV tiles"),
        Param("BC", (32, 64, 128), "keys per KV tile"),
        Param("STAGES", (1, 2, 3), "depth of each warp's K/V cp.async ring"),
        Param("SWIZZLE", (0, 1), "XOR-swizzled shared tiles (head_dim 64/128) or rows padded by 16 bytes"),
        Param("COMBINE_THREADS", (64, 128, 256), "threads per block of the combine kernel"),
        Param("COMBINE", (0, 1), "the splits combined by a second kernel (0) or in a cluster of their blocks (1)"),
    )
    default_config = {"SPLITS": 16, "WARPS": 4, "BC": 32, "STAGES": 2, "SWIZZLE": 0, "COMBINE_THREADS": 128,
                      "COMBINE": 0}

    @staticmethod
    def geometry(config: Config, head_dim: int) -> dict[str, int]:
        row = head_dim if config["SWIZZLE"] else head_dim + 8
        warps = config["WARPS"]
        rings = warps * config["STAGES"] * 2 * config["BC"] * row * 2
        merge = warps * 16 * (head_dim + 2) * 4  # the warps' states, written over the rings after the loop
        merge += 16 * (head_dim + 1) * 4 * config["COMBINE"]  # and the split's state its cluster reads
        return {
            "threads": 32 * warps,
            "smem_bytes": 16 * row * 2 + max(rings, merge),
            "tile_registers": head_dim // 2 + config["BC"] + head_dim // 4,
        }

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        sq = attention_dims(shape).sq
        if sq > MAX_SEQ_Q:
            return f"split_kv is for decoding: seq_q {sq} > {MAX_SEQ_Q}"
        return super().unfit(shape, device)

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        p = attention_dims(shape)
        d = p.d
        g = self.geometry(config, d)
        problems = []
        blocks = self.row_tiles(shape) * config["SPLITS"]
        if config["SPLITS"] > 1 and blocks > BLOCKS_PER_SM * device.multiprocessors:
            heads = f"{p.b}x{p.h}" if not p.grouped else f"{p.b}x{p.hkv} kv"
            problems.append(f"{blocks} blocks > {BLOCKS_PER_SM} per SM: SPLITS={config['SPLITS']} is more than "
                            f"{heads} heads need on {device.multiprocessors} SMs")  # fmt: skip
        if g["tile_registers"] > MAX_TILE_REGISTERS:
            problems.append(f"{g['tile_registers']} registers of tiles per thread would spill")
        if config["SWIZZLE"] and d not in SWIZZLE_DIMS:
            problems.append(f"SWIZZLE needs head_dim 64 or 128, not {d}")
        if self.writes_output(config) and config["COMBINE_THREADS"] != self.default_config["COMBINE_THREADS"]:
            problems.append("COMBINE_THREADS only matters with the combine kernel (COMBINE=0, SPLITS > 1)")
        if config["COMBINE"] and not 2 <= config["SPLITS"] <= MAX_CLUSTER:
            problems.append(f"COMBINE=1 makes the splits one cluster: 2 to {MAX_CLUSTER}, not {config['SPLITS']}")
        if config["COMBINE"] and tuple(device.compute_capability) < (9, 0):
            problems.append(f"COMBINE=1 needs thread block clusters (compute capability 9.0); {device.name} has "
                            f"{device.cc}")  # fmt: skip
        return problems + smem_problems(g["smem_bytes"], device)

    @staticmethod
    def row_tiles(shape: Shape) -> int:
        """Blocks per split: tiles of 16 packed query rows, ceil(G·seq_q / 16) per kv head."""
        p = attention_dims(shape)
        return p.b * p.hkv * ceil_div(p.group * p.sq, 16)

    @staticmethod
    def writes_output(config: Config) -> bool:
        """The main kernel writes O and LSE itself: its splits combined in their cluster, or a single split."""
        return bool(config["COMBINE"]) or config["SPLITS"] == 1

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        if self.writes_output(config):
            return {}
        b, h, hkv, sq, skv, d = attention_dims(shape)
        splits = config["SPLITS"]
        return {"o_part": BufferSpec((splits, b * h * sq, d)), "lse_part": BufferSpec((splits, b * h * sq))}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        p = attention_dims(shape)
        b, sq, skv, d = p.b, p.sq, p.skv, p.d
        g = self.geometry(config, d)
        rows = b * p.h * sq
        threads = config["COMBINE_THREADS"]
        scale = np.float32(self.space.scale_log2(d))
        grid = (ceil_div(p.group * sq, 16) * config["SPLITS"], p.hkv, b)
        sizes = (np.int32(sq), np.int32(skv), scale, *kv_args(p))
        if self.writes_output(config):  # no combine kernel
            return [Launch("attention_split_kv", grid, (g["threads"], 1, 1), g["smem_bytes"],
                           ("q", "k", "v", "o", "lse", *sizes))]  # fmt: skip
        return [
            Launch("attention_split_kv", grid, (g["threads"], 1, 1), g["smem_bytes"],
                   ("q", "k", "v", "o_part", "lse_part", *sizes)),
            Launch("attention_combine", (min(ceil_div(rows * d, threads), 16 * device.multiprocessors), 1, 1),
                   (threads, 1, 1), 0, ("o_part", "lse_part", "o", "lse", np.int32(rows)),
                   overlaps_previous=tuple(device.compute_capability) >= (9, 0)),  # see the template
        ]  # fmt: skip

    def rule_configs(self, shape: Shape, device: DeviceInfo) -> list[Config]:
        """The decoding rule's configurations, best first (the family's rule takes the first that fits). Splits for
        about one block per SM, each of at least four KV tiles of the default size (`row_tiles` blocks per split).
        On Hopper, where that makes several splits of short KV, the splits are one cluster of at most 8 that
        combines them itself (one launch, three-stage rings). H200, 1x32/8 heads bf16 (2026-11-29g,
        `decode_probe.py`): 16 splits through the combine kernel beat the 32 of two blocks per SM at 8K, 32K and
        128K keys (25.3 / 53.0 / 148.4 against 30.7 / 62.0 / 156.8 us); the cluster of 8 won at 8K (21.0 us, 1.10x
        cuDNN), tied at 32K and lost at 128K, where more splits read in parallel; 16 in a cluster ran slower than
        8 (a GPC holds it). Without the cluster, XOR-swizzled tiles where the head_dim allows: the 40-trial
        searches of issue 20's rows kept them in 6 of 7 winners, and at batch 64 (8K and 32K keys) the winner was
        this rule's configuration with them, 7-8% faster (0.93x to 1.00x cuDNN)."""
        p = attention_dims(shape)
        config = dict(self.default_config)
        tiles = self.row_tiles(shape)
        splits = 1
        for s in self.space.domain("split_kv.SPLITS"):
            if tiles * s <= device.multiprocessors and s * 4 * config["BC"] <= p.skv:
                splits = s
        cluster = min(splits, RULE_CLUSTER_SPLITS)
        configs = []
        short_kv = p.skv <= cluster * RULE_CLUSTER_KEYS_PER_SPLIT
        if tuple(device.compute_capability) >= (9, 0) and cluster >= 2 and short_kv:
            configs.append({**config, "SPLITS": cluster, "COMBINE": 1, "STAGES": 3})
        return configs + [{**config, "SPLITS": splits, "SWIZZLE": int(p.d in SWIZZLE_DIMS)}]

    def describe(self, config: Config) -> str:
        c = self.local(config)
        combine = "cluster" if c["COMBINE"] else "none" if c["SPLITS"] == 1 else c["COMBINE_THREADS"]
        return (f"split_kv splits={c['SPLITS']} warps={c['WARPS']} BC={c['BC']} stages={c['STAGES']} "
                f"{'swz' if c['SWIZZLE'] else 'pad'} combine={combine}")  # fmt: skip
