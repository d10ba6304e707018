"""The `persistent` algorithm of LayerNorm's and RMSNorm's backward (template: layernorm_backward_persistent.cu).

A grid of BPS blocks per SM walks every row: a block is BLOCK/TPR groups of TPR threads (a warp, several warps, or
the whole block per row), each group taking ROWS rows at a time. A row's dy and x are read once, kept in their own
dtype in registers (CACHE=1) or shared memory (CACHE=2) while the group reduces Σg and Σg·x̂, and dx is written
once. Each thread owns the same columns in every row, so its Σdy·x̂ and Σdy stay in fp32 registers across all of
the block's rows; the block writes them once, as one fp32 partial row (its groups added in shared memory first),
and `layernorm_backward_finalize` adds the partial rows up (RWARPS warps per 32*RVEC columns), in a fixed order.

FUSE=1 folds that finalize into the main kernel (no second launch, no second grid's tail): the last block of each
of RWARPS segments (partial rows b with b % RWARPS = s) to finish sums its segment, and the last of those sums the
segments, in the finalize's order with the same RWARPS, so dweight/dbias have the same bits as with FUSE=0. The
tickets are RWARPS + 1 counters in the workspace, zeroed by a memset before each launch (`Zero`): the runtime
allocates workspaces per call (the torch launcher from the caching allocator, uninitialised), so a counter left at
0 by the previous call cannot be relied on, and a 4-byte memset costs less than a kernel launch with its tail.
The two-level sum keeps the last block's reads to parts/RWARPS + RWARPS rows: a single last block reading all
parts rows (RWARPS=1) would read 132 to 264 rows from one SM, several microseconds at 8192x768.

Bytes moved per row element: 3 × itemsize (dy, x read; dx written), against 5 × itemsize for tiles with SPLIT=1
(dy and x read twice) and 3 × itemsize + 16 B / RPB (partial dw and db written and read back) with SPLIT=0; here
the partials are 16 B per column per block, BPS × SMs blocks in all, whatever the row count.
"""

from __future__ import annotations

import itertools

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._precision import dtype_code, widest_vec
from autotune.spaces._vectors import block_problems, vector_problems
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step, Zero, ceil_div

MAX_SMS = 192  # partial rows are allocated for BPS * MAX_SMS blocks at most (the workspace knows no device)
THREADS_PER_SM = 2048  # resident threads per SM (sm_70 to sm_90)
SMEM_PER_BLOCK_RESERVED = 1024  # shared memory the system keeps per resident block (sm_80 and later)
STATIC_SHARED = 2048  # the row groups' scratch: BLOCK/4 floats at most (ptxas: up to 1 KB)
# Registers besides the data a thread holds (ptxas for sm_90 at its limit, 160 configurations of every dtype: 20 to
# 40 with the rows in registers; with them in shared memory 24 to 48, more with more chunks; see `registers`)
BASE_REGISTERS = 40
MAX_SMEM_ITEMS = 8  # CACHE=2 with 12 or 16 chunks per thread: 7 of 182 sampled ones spilled (nvcc 13), none with fewer
IN_FLIGHT_BYTES = 48 << 10  # rule: bytes of dy and x one SM's groups have in flight at once (Little's law, HBM3)


class PersistentBackward(Algorithm):
    name = "persistent"
    template = "layernorm_backward_persistent.cu"
    dtypes = dtypes.FLOAT_DTYPES
    min_cc = (7, 0)  # __ldcs, named barriers, __shfl_xor_sync (CACHE=2 asks for 8.0: cp.async)
    parameters = (
        Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
        Param("TPR", (32, 64, 128, 256, 512, 1024), "threads per row: a warp, several warps, or the whole block"),
        Param("VEC", (1, 2, 4, 8), "elements per access (16 B at most)"),
        Param("ITEMS", (1, 2, 3, 4, 6, 8, 12, 16), "chunks of VEC columns per thread: rows of TPR*VEC*ITEMS"),
        Param("ROWS", (1, 2), "rows a group holds at once (loads in flight together, one reduction)"),
        Param("CACHE", (1, 2), "the rows' dy and x between the passes: 1 registers, 2 shared memory (cp.async)"),
        Param("BPS", (1, 2, 3, 4, 6, 8), "blocks per SM: the grid, and the register budget ptxas fits"),
        Param("STREAM", (0, 1), "evict-first loads of dy, x and stores of dx"),
        Param("RWARPS", (1, 2, 4, 8, 16, 32), "finalize: warps per block, each summing every RWARPS-th partial row "
              "(FUSE=1: segments, each summed by its last block)"),
        Param("RVEC", (1, 2, 4), "finalize: columns per thread (FUSE=1: of the last blocks' sums)"),
        Param("FUSE", (0, 1), "the finalize: 0 a second launch, 1 the main kernel's last blocks (a memset first)"),
    )
    default_config = {"BLOCK": 256, "TPR": 256, "VEC": 4, "ITEMS": 4, "ROWS": 1, "CACHE": 1, "BPS": 1,
                      "STREAM": 0, "RWARPS": 8, "RVEC": 1, "FUSE": 0}  # fmt: skip

    # --- geometry -------------------------------------------------------------------------------------------
    @staticmethod
    def capacity(config: Config) -> int:
        """The longest row a group holds: TPR*VEC*ITEMS columns."""
        return config["TPR"] * config["VEC"] * config["ITEMS"]

    def registers(self, config: Config) -> int:
        """Registers a thread needs without spilling: one per column it owns for its dw sums (and db), and the
        weights and (CACHE=1) each of the ROWS rows' dy and x in their own dtype, a register per 4 bytes of a
        chunk (at least one): the template keeps half chunks as loaded across the row's reduction
        (row_groups.cuh, `forget`). Calibrated with ptxas at its limit; the compile tests find no spills in
        sampled configurations."""
        space = self.space
        items, vec = config["ITEMS"], config["VEC"]

        def chunk(itemsize: int) -> int:
            return items * max(1, vec * itemsize // 4)

        words = (1 if space.rms else 2) * items * vec + chunk(dtypes.dtype(space.wdtype).itemsize)
        if config["CACHE"] == 1:
            words += config["ROWS"] * 2 * chunk(space.itemsize)
        else:  # ptxas reads the second row's chunks from shared memory ahead, as many words as both rows in registers
            words += (config["ROWS"] - 1) * 4 * chunk(space.itemsize)
            words += 3 * items // 2  # shared-memory addressing, per chunk
        return BASE_REGISTERS + words

    @staticmethod
    def register_cap(config: Config, device: DeviceInfo) -> int:
        """What ptxas may use under __launch_bounds__(BLOCK, BPS): BPS blocks' registers in one SM's file,
        allocated in units of 8 per thread."""
        per_thread = device.registers_per_multiprocessor // (config["BLOCK"] * config["BPS"])
        return min(255, per_thread // 8 * 8)

    def shared_bytes(self, config: Config) -> int:
        """Dynamic shared memory per block: the row cache (CACHE=2), or where several groups add up their sums."""
        n = config["VEC"] * config["ITEMS"]
        cache = 2 * config["ROWS"] * config["BLOCK"] * n * self.space.itemsize if config["CACHE"] == 2 else 0
        sums = config["BLOCK"] * n * 4 if config["TPR"] < config["BLOCK"] else 0
        return max(cache, sums)

    @staticmethod
    def groups(config: Config) -> int:
        return config["BLOCK"] // config["TPR"]

    def partial_rows(self, config: Config, shape: Shape) -> int:
        """Rows of the fp32 partials the workspace holds: one per block of the largest grid."""
        rows = shape[0]
        return max(1, min(ceil_div(rows, self.groups(config) * config["ROWS"]), config["BPS"] * MAX_SMS))

    def grid(self, config: Config, shape: Shape, device: DeviceInfo) -> int:
        """BPS blocks per SM, fewer where the rows do not need them; never more than the partials hold."""
        return min(config["BPS"] * device.multiprocessors, self.partial_rows(config, shape))

    # --- constraints ----------------------------------------------------------------------------------------
    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        rows, cols = shape
        space = self.space
        block, tpr = config["BLOCK"], config["TPR"]
        problems = []
        if tpr > block:
            problems.append(f"TPR={tpr} threads per row > BLOCK={block}")
        elif 32 < tpr < block and block // tpr > 15:
            problems.append(f"{block // tpr} groups of {tpr} threads: named barriers 1 to 15 give 15 at most")
        problems += block_problems(block, device) + vector_problems(config["VEC"], space.dtype)
        if cols > self.capacity(config):
            where = "register" if config["CACHE"] == 1 else "shared-memory"
            problems.append(f"rows of {cols} do not fit the {where} cache of TPR*VEC*ITEMS = {self.capacity(config)}")
        need, cap = self.registers(config), self.register_cap(config, device)
        if need > cap:
            problems.append(f"about {need} registers per thread > the {cap} of {config['BPS']} blocks of {block} "
                            f"threads per SM")  # fmt: skip
        if config["BPS"] * block > THREADS_PER_SM:
            problems.append(f"{config['BPS']} blocks of {block} threads > {THREADS_PER_SM} threads per SM")
        smem = self.shared_bytes(config)
        if smem + STATIC_SHARED > device.smem_per_block_optin:
            problems.append(f"{smem} B of shared memory per block > the device's {device.smem_per_block_optin} B")
        elif config["BPS"] * (smem + STATIC_SHARED + SMEM_PER_BLOCK_RESERVED) > device.smem_per_multiprocessor:
            problems.append(f"{config['BPS']} blocks of {smem} B of shared memory do not fit one SM")
        if config["CACHE"] == 2:
            if config["ITEMS"] > MAX_SMEM_ITEMS:
                problems.append(f"CACHE=2 with {config['ITEMS']} chunks per thread (> {MAX_SMEM_ITEMS}): ptxas reads "
                                "them ahead into more registers than it has, and spills")  # fmt: skip
            if tuple(device.compute_capability) < (8, 0):
                problems.append(f"CACHE=2 (cp.async) needs compute capability 8.0; {device.name} has {device.cc}")
            if config["VEC"] * space.itemsize < 4:
                problems.append(f"CACHE=2 copies 4, 8 or 16 bytes at a time (cp.async); VEC={config['VEC']} "
                                f"{space.dtype} is {config['VEC'] * space.itemsize} B")  # fmt: skip
        return problems

    # --- rendering ------------------------------------------------------------------------------------------
    def defines(self, config: Config) -> dict[str, int | str]:
        space = self.space
        return {**self.local(config), "DTYPE": dtype_code(space.dtype), "WDTYPE": dtype_code(space.wdtype),
                "RMS": int(space.rms)}  # fmt: skip

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        """The fp32 partial rows, and with FUSE=1 the tickets: one counter of the segments summed, then one per
        segment (RWARPS), zeroed before each launch (`launches`)."""
        parts = (self.partial_rows(config, shape), shape[1])
        out = {"partial_dw": BufferSpec(parts)}
        if not self.space.rms:
            out["partial_db"] = BufferSpec(parts)
        if config["FUSE"]:
            out["tickets"] = BufferSpec((1 + config["RWARPS"],), "int32")
        return out

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        rms = self.space.rms
        # RMSNorm has no mean and no dbias: those arguments name a buffer the kernels never touch under RMS=1.
        mean = "rstd" if rms else "mean"
        dbias, partial_db = ("dweight", "partial_dw") if rms else ("dbias", "partial_db")
        grid = self.grid(config, shape, device)
        r, c = np.int32(rows), np.int32(cols)
        args = ("dy", "x", "weight", mean, "rstd", "dx", "partial_dw", partial_db, r, c)
        if config["FUSE"]:  # the tickets start at 0 (see the module): a memset, then the one launch
            return [Zero("tickets"),
                    Launch("layernorm_backward_persistent", (grid, 1, 1), (config["BLOCK"], 1, 1),
                           self.shared_bytes(config), (*args, "tickets", "dweight", dbias))]  # fmt: skip
        return [
            Launch("layernorm_backward_persistent", (grid, 1, 1), (config["BLOCK"], 1, 1), self.shared_bytes(config),
                   args),
            Launch("layernorm_backward_finalize", (ceil_div(cols, 32 * config["RVEC"]), 1 if rms else 2, 1),
                   (32 * config["RWARPS"], 1, 1), 0, ("partial_dw", partial_db, "dweight", dbias, np.int32(grid), c)),
        ]  # fmt: skip

    # --- the rule-based default -----------------------------------------------------------------------------
    def rule(self, shape: Shape, device: DeviceInfo) -> Config | None:
        """A configuration for ``shape`` (with ALGO), or None where no cache holds its rows. 16-byte vectors where
        the row length allows, and for each TPR the fewest chunks per thread that cover the row. Then among the
        valid (TPR, ROWS, CACHE, BLOCK, BPS), by Little's law: the most bytes of dy and x in flight over the busy
        SMs, counting at most `IN_FLIGHT_BYTES` per SM (what keeps its share of HBM busy); then the fewest idle
        lanes, the fewest blocks (partial rows to write and add up), the most threads (warps to hide latency
        with), the fewest rows per group, registers before shared memory, the fewest threads per row (fewer
        barriers). The finalize: about 8 partial rows per warp, a column per thread."""
        rows, cols = shape
        space = self.space
        vec = widest_vec(space.dtype, cols, space.domain("persistent.VEC"))
        row_bytes = cols * 2 * space.itemsize
        best, best_key = None, None
        for tpr in space.domain("persistent.TPR"):
            fitting = [i for i in space.domain("persistent.ITEMS") if tpr * vec * i >= cols]
            if not fitting:
                continue
            base = {"ALGO": self.name, **self.default_config, "TPR": tpr, "VEC": vec, "ITEMS": fitting[0]}
            idle = tpr * vec * fitting[0] - cols
            for at_once, cache, block, bps in itertools.product(*(space.domain(f"persistent.{p}") for p in
                                                                  ("ROWS", "CACHE", "BLOCK", "BPS"))):  # fmt: skip
                config = {**base, "ROWS": at_once, "CACHE": cache, "BLOCK": block, "BPS": bps}
                if block < tpr or self.constraints(config, shape, device):  # every value is in its domain
                    continue
                grid = self.grid(config, shape, device)
                busy = min(grid, device.multiprocessors)
                groups = min(grid * self.groups(config), ceil_div(rows, at_once))
                in_flight = busy * min(groups * at_once * row_bytes / busy, IN_FLIGHT_BYTES)
                key = (in_flight, -idle, -grid, block * bps, -at_once, -cache, -tpr)
                if best_key is None or key > best_key:
                    best, best_key = config, key
        if best is None:
            return None
        grid = self.grid(best, shape, device)
        rwarps = [w for w in space.domain("persistent.RWARPS") if w * 8 <= max(grid, 8)]
        best["RWARPS"] = rwarps[-1] if rwarps else space.domain("persistent.RWARPS")[0]
        best["RVEC"] = space.domain("persistent.RVEC")[0]
        # FUSE: the domain's first, 0 in the full space (no GPU has compared the two yet); a space narrowed to
        # FUSE=1 gets it. The same RWARPS either way: with FUSE=1 the last block reads grid/RWARPS + RWARPS partial
        # rows, about 24 at 132 to 264 blocks.
        best["FUSE"] = space.domain("persistent.FUSE")[0]
        return best

    def describe(self, config: Config) -> str:
        c = self.local(config)
        return (f"persistent block={c['BLOCK']} tpr={c['TPR']} vec={c['VEC']} items={c['ITEMS']} rows={c['ROWS']} "
                f"{'regs' if c['CACHE'] == 1 else 'smem'} bps={c['BPS']}{' stream' if c['STREAM'] else ''} "
                f"{'fused' if c['FUSE'] else 'finalize'}={c['RWARPS']}x{c['RVEC']}")  # fmt: skip
