"""The `tiles` algorithm of LayerNorm's and RMSNorm's backward (template: layernorm_backward.cu): the family's
first algorithm, as it was before the family had algorithms (its configurations, defines and launches unchanged).

A block walks RPB consecutive rows over one tile of BLOCK*VEC*ITEMS columns, keeping its dweight/dbias sums in
registers. Tunables: block size, vector width, columns per thread, rows per block, fused (whole row per block) or
split (row sums first, then column tiles: any width), and how dweight/dbias are reduced across rows: atomics (fp32
weights only), or per-block partials and a second pass.

Why it stays far from the copy bandwidth (H100, 8192x768 bf16 at 571 GB/s): its rule default runs 512 blocks of
16 rows each, a row at a time (96 of a block's 128 threads hold a 16-byte chunk: about 3 KB of loads in flight per
block, two block-wide reductions per row); its partials are an fp32 row of dw and one of db per block, written and
read back (16 B per column per RPB rows, where bf16 moves 6 B per column per row: 2/3 more traffic at RPB=4, as the
rule picks for 4096x4096); the reduce launch sums them with a thread per column (768 threads on the whole GPU, each
walking 512 partial rows in turn); and SPLIT=1 (rows longer than a block's tile) reads dy and x twice. The
`persistent` algorithm (`autotune.spaces.layernorm_backward_persistent`) answers each of these.
"""

from __future__ import annotations

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._precision import dtype_code, widest_vec
from autotune.spaces._vectors import block_problems, vector_problems
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step, Zero, ceil_div

REGISTERS_PER_FLOAT = 5  # per column a thread owns: dw, db and weight sums, g and x̂ of the current row
BASE_REGISTERS = 40


class TilesBackward(Algorithm):
    name = "tiles"
    template = "layernorm_backward.cu"
    dtypes = dtypes.FLOAT_DTYPES
    parameters = (
        Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
        Param("VEC", (1, 2, 4, 8), "elements per access (16 B at most)"),
        Param("ITEMS", (1, 2, 4, 8), "chunks of VEC columns per thread (a tile is BLOCK*VEC*ITEMS columns)"),
        Param("RPB", (1, 4, 16, 64, 256), "rows per block"),
        Param("SPLIT", (0, 1), "0: whole rows per block; 1: row sums first, then column tiles (any width)"),
        Param("ATOMIC", (0, 1), "dweight/dbias: 1 atomics; 0 per-block partials and a second pass"),
    )
    default_config = {"BLOCK": 256, "VEC": 4, "ITEMS": 2, "RPB": 16, "SPLIT": 1, "ATOMIC": 0}

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        rows, cols = shape
        space = self.space
        problems = block_problems(config["BLOCK"], device)
        tile = config["BLOCK"] * config["VEC"] * config["ITEMS"]
        if not config["SPLIT"] and cols > tile:
            problems.append(f"rows of {cols} do not fit one tile of {tile} columns (SPLIT=0)")
        cap = min(255, device.registers_per_multiprocessor // config["BLOCK"])
        if REGISTERS_PER_FLOAT * config["ITEMS"] * config["VEC"] + BASE_REGISTERS > cap:
            problems.append(f"{config['ITEMS'] * config['VEC']} columns per thread exceed the {cap} registers of a "
                            f"{config['BLOCK']}-thread block")  # fmt: skip
        if config["SPLIT"] and ceil_div(cols, tile) > 65535:
            problems.append("more than 65535 column tiles")
        problems += vector_problems(config["VEC"], space.dtype)
        if config["ATOMIC"] and space.wdtype != "float32":
            problems.append(f"ATOMIC=1 accumulates into fp32 only; dweight is {space.wdtype}")
        return problems

    def defines(self, config: Config) -> dict[str, int | str]:
        space = self.space
        return {**self.local(config), "DTYPE": dtype_code(space.dtype), "WDTYPE": dtype_code(space.wdtype),
                "RMS": int(space.rms)}  # fmt: skip

    def rule(self, shape: Shape, device: DeviceInfo) -> Config:
        """The widest aligned vector; the smallest block whose tile holds the row in two chunks per thread (whole
        rows per block, no row-sum launch), else split tiles; rows per block so that about four blocks per SM
        share the rows. The family's configuration (with ALGO); its default where this one is invalid."""
        rows, cols = shape
        space = self.space
        vec = widest_vec(space.dtype, cols, space.domain("tiles.VEC"))
        config = {"ALGO": self.name, **self.default_config, "VEC": vec, "ITEMS": 2}
        fits = [b for b in space.domain("tiles.BLOCK") if b >= 128 and b * vec * 2 >= cols]
        if fits:
            config.update(BLOCK=fits[0], SPLIT=0)
        else:
            config.update(BLOCK=256, SPLIT=1)
        tiles = ceil_div(cols, config["BLOCK"] * vec * 2)
        wanted = ceil_div(rows * tiles, 4 * device.multiprocessors)
        config["RPB"] = max([r for r in space.domain("tiles.RPB") if r <= max(wanted, 1)], default=1)
        if space.violations(config, shape, device):
            return {"ALGO": self.name, **self.default_config}
        return config

    def _grid(self, config: Config, shape: Shape) -> tuple[int, int, int]:
        rows, cols = shape
        tile = config["BLOCK"] * config["VEC"] * config["ITEMS"]
        return (ceil_div(rows, config["RPB"]), ceil_div(cols, tile) if config["SPLIT"] else 1, 1)

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        space = {}
        if config["SPLIT"]:
            space["rowsums"] = BufferSpec((2 * rows,))
        if not config["ATOMIC"]:
            parts = ceil_div(rows, config["RPB"])
            space["partial_dw"] = BufferSpec((parts, cols))
            if not self.space.rms:
                space["partial_db"] = BufferSpec((parts, cols))
        return space

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        rms = self.space.rms
        block = (config["BLOCK"], 1, 1)
        r, c = np.int32(rows), np.int32(cols)
        # RMSNorm has no mean and no dbias: those arguments name a buffer the kernels never touch under RMS=1.
        mean = "rstd" if rms else "mean"
        dbias, partial_db = ("dweight", "partial_dw") if rms else ("dbias", "partial_db")
        steps: list[Step] = []
        if config["ATOMIC"]:
            steps += [Zero("dweight")] + ([] if rms else [Zero("dbias")])
        if config["SPLIT"]:
            steps.append(Launch("layernorm_backward_rowsums", (ceil_div(rows, config["BLOCK"] // 32), 1, 1), block, 0,
                                ("dy", "x", "weight", mean, "rstd", "rowsums", r, c)))  # fmt: skip
        sums = "rowsums" if config["SPLIT"] else "rstd"  # unread without SPLIT
        dw, db = ("dweight", dbias) if config["ATOMIC"] else ("partial_dw", partial_db)
        steps.append(Launch("layernorm_backward", self._grid(config, shape), block, 0,
                            ("dy", "x", "weight", mean, "rstd", sums, "dx", dw, db, r, c)))  # fmt: skip
        if not config["ATOMIC"]:
            parts = np.int32(ceil_div(rows, config["RPB"]))
            steps.append(Launch("layernorm_backward_reduce", (ceil_div(cols, 256), 1, 1), (256, 1, 1), 0,
                                ("partial_dw", partial_db, "dweight", dbias, parts, c)))  # fmt: skip
        return steps
