"""What the row kernels (softmax, layernorm, rmsnorm) share: the tunables of kernel_templates/rows.cuh.

dtype: x and y in float32, float16 or bfloat16 (statistics and arithmetic in fp32; see `_precision`). Weights are
in the problem's dtype, or in fp32 in the `_mixed` variants (``weight_dtype``), as mixed-precision training keeps
them.

A group of threads owns each row — a warp (several rows per block), the whole block, a cluster of blocks, or
SPLIT blocks in two launches (few long rows) — reads it in vectors, and may keep it on chip between passes.
Caching is valid only for rows that fit the cache: the constraint depends on the shape, so the dispatcher picks,
for an untuned shape, a tuned configuration that fits it.
"""

from __future__ import annotations

import math
from typing import ClassVar, Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._precision import dtype_code, infer_dtype_by_specs, output_tolerance, widest_vec
from autotune.spaces._vectors import block_problems, vector_problems
from autotune.spaces.base import BufferSpec, Config, KernelSpace, Launch, Param, Step, ceil_div

MAPPINGS = {"warp": 0, "block": 1, "cluster": 2, "split": 3}
CLUSTER_MIN_CC = (9, 0)  # thread-block clusters and distributed shared memory
CP_ASYNC_MIN_CC = (8, 0)  # cp.async (the shared-memory row cache)
LONG_ROW_BLOCK = 512  # threads per row of the rule default for rows longer than a warp handles
STATIC_SHARED = 1024  # static shared memory of a row kernel besides the cache (ptxas: up to 400 B)
# The split kernels with CACHE=2 unroll their ITEMS chunks: ptxas (sm_90a, nvcc 13.0) spilled 220-4786 bytes at 1024
# threads x 32 items, 134 at 1024 x 16 and 32 in softmax's stats kernel at 256 x 32; none within these limits in a
# sweep of 108 random split configurations (the block and cluster mappings, tested longer, keep their range)
SPLIT_SMEM_UNROLL = 8192
SPLIT_SMEM_ITEMS = 16
BASE_REGISTERS = 40  # registers a row kernel uses besides its cache (measured with ptxas: 26 to 57)

ROW_PARAMETERS = (
    Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
    Param("MAPPING", tuple(MAPPINGS), "a warp per row (several rows per block), a block per row, a cluster of "
          "CLUSTER blocks per row exchanging partial statistics through distributed shared memory (sm_90), or "
          "SPLIT blocks per row in two launches"),
    Param("CLUSTER", (2, 4, 8), "blocks per row with MAPPING=cluster"),
    Param("SPLIT", (2, 4, 8, 16, 32, 64, 128, 256), "blocks per row with MAPPING=split: a first launch writes each "
          "block's partial statistics (fp32 workspace), the second merges its row's and writes the output"),
    Param("VEC", (1, 2, 4, 8), "elements per access, 16 B at most (scalar fall-back where rows are unaligned)"),
    Param("CACHE", (0, 1, 2), "keep the row in registers (1) or in shared memory (2) between passes, or read it "
          "again (0)"),
    Param("ITEMS", (1, 2, 4, 8, 16, 32), "chunks of VEC elements each thread caches (with CACHE=1 or 2)"),
    Param("STREAM", (0, 1), "streaming loads/stores (__ldcs/__stcs)"),
)
ROW_DEFAULT = {"BLOCK": 256, "MAPPING": "warp", "CLUSTER": 2, "SPLIT": 2, "VEC": 4, "CACHE": 0, "ITEMS": 8,
               "STREAM": 0}
SPLIT_STATE = 4  # fp32 values per block in the split mapping's workspace (the families publish 1 to 3)
MAX_SPLIT_BLOCKS = 1 << 20  # blocks of a split grid at most (a 16 MiB workspace)
INT32_MAX = (1 << 31) - 1
FEW_ROWS = 32  # at most this many rows of SPLIT_MIN_COLS or more are "few long rows" (shape_class, split_rule)
SPLIT_MIN_COLS = 32768


class RowSpace(KernelSpace):
    """What every row family shares, the norm backward too: rows × cols problems, weights in the problem's dtype
    or fp32 (_mixed), per-dtype tolerances, the ragged validation shapes."""

    dims = ("rows", "cols")
    default_shape = (4096, 4096)
    metric_unit = "GB/s"
    dtypes = dtypes.FLOAT_DTYPES
    weight_dtype: ClassVar[str | None] = None  # None: weights in the problem's dtype; "float32": a _mixed variant
    mixed_variant: ClassVar[str] = ""  # the kernel that takes fp32 weights with half x (named in dtype errors)

    @property
    def wdtype(self) -> str:
        return self.weight_dtype or self.dtype

    @property
    def itemsize(self) -> int:
        return dtypes.dtype(self.dtype).itemsize

    @classmethod
    def infer_dtype(cls, given: Mapping[str, str]) -> str:
        hint = f"fp32 weights with half x: autotune.load({cls.mixed_variant!r})" if cls.mixed_variant else ""
        return infer_dtype_by_specs(cls, given, hint)

    def fp32_tolerance(self, output: str, shape: Shape) -> float:
        """The tolerance of ``output`` were it computed and held in fp32."""
        return 1e-5

    def tolerance(self, output: str, shape: Shape) -> float:
        return output_tolerance(self.outputs(shape)[output].dtype, self.fp32_tolerance(output, shape))

    def elem(self, shape: tuple[int, ...]) -> BufferSpec:
        """A buffer of the problem's dtype."""
        return BufferSpec(tuple(shape), self.dtype)

    def weight(self, cols: int) -> BufferSpec:
        return BufferSpec((cols,), self.wdtype)

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        x = inputs["x"]
        if len(x) != 2:
            raise InvalidArgument(f"x must be 2-D (rows, cols), got shape {tuple(x)}")
        if 0 in x:
            raise InvalidArgument(f"x is empty (shape {tuple(x)})")
        return (x[0], x[1])

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        # One row, rows of length 1, lengths that are no multiple of 4 nor of any block size, a very long row,
        # and the target's own row length with a ragged number of rows. Each is checked where the
        # configuration is valid for it (a register cache holds rows up to some length).
        return [(1, 1), (7, 1), (3, 7), (5, 1031), (2, 65539), (3, shape[1])]


class RowKernelSpace(RowSpace):
    """The row kernels of kernel_templates/rows.cuh (softmax, layernorm, rmsnorm, softmax_backward): their tunables
    (ROW_PARAMETERS), constraints, launches, workspace and rule-based default."""

    cached_rows: ClassVar[int] = 1  # rows of the problem a thread caches with CACHE=1 (softmax_backward: y and dy)
    split_inputs: ClassVar[tuple[str, ...]] = ("x",)  # the inputs of the split mapping's stats launch

    @staticmethod
    def threads_per_row(config: Config) -> int:
        if config["MAPPING"] in ("cluster", "split"):
            return config["BLOCK"] * RowKernelSpace.blocks_per_row(config)
        return 32 if config["MAPPING"] == "warp" else config["BLOCK"]

    @staticmethod
    def blocks_per_row(config: Config) -> int:
        """Blocks that share a row (1 with MAPPING warp or block)."""
        mapping = config["MAPPING"]
        return config["CLUSTER"] if mapping == "cluster" else config["SPLIT"] if mapping == "split" else 1

    @staticmethod
    def span(cols: int, vec: int) -> int:
        """Elements the chunks of a row cover: rows whose length is no multiple of VEC start their first chunk up
        to VEC - 1 elements early, at an aligned address (rows.cuh, row_pre)."""
        return cols + (vec - 1 if cols % vec else 0)

    def row_constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        rows, cols = shape
        problems = block_problems(config["BLOCK"], device)
        if config["MAPPING"] == "cluster":
            if tuple(device.compute_capability) < CLUSTER_MIN_CC:
                problems.append(f"MAPPING=cluster needs compute capability 9.0; {device.name} has {device.cc}")
        elif config["CLUSTER"] != ROW_DEFAULT["CLUSTER"]:
            problems.append("CLUSTER only matters with MAPPING=cluster")
        if config["MAPPING"] == "split":
            problems += self.split_problems(config)
            if rows * config["SPLIT"] > MAX_SPLIT_BLOCKS:
                problems.append(f"{rows} rows x SPLIT={config['SPLIT']} blocks exceed {MAX_SPLIT_BLOCKS} (the "
                                f"split mapping is for few rows; its workspace grows with the blocks)")  # fmt: skip
        elif config["SPLIT"] != ROW_DEFAULT["SPLIT"]:
            problems.append("SPLIT only matters with MAPPING=split")
        if self.span(cols, config["VEC"]) + self.threads_per_row(config) * config["VEC"] > INT32_MAX:
            problems.append(f"rows of {cols} with {self.threads_per_row(config)} threads per row overflow the "
                            f"kernels' int32 column index")  # fmt: skip
        problems += vector_problems(config["VEC"], self.dtype)
        if config["CACHE"]:
            where = "register" if config["CACHE"] == 1 else "shared-memory"
            capacity = self.threads_per_row(config) * config["VEC"] * config["ITEMS"]
            if self.span(cols, config["VEC"]) > capacity:
                problems.append(f"rows of {cols} do not fit the {where} cache of {capacity} elements")
        if config["CACHE"] == 1:
            cap = min(255, device.registers_per_multiprocessor // config["BLOCK"])
            values = config["ITEMS"] * config["VEC"] * self.cached_rows
            if values + BASE_REGISTERS > cap:
                problems.append(f"a cache of {values} fp32 values per thread exceeds the {cap} registers a "
                                f"{config['BLOCK']}-thread block allows")  # fmt: skip
        elif config["CACHE"] == 2:
            if tuple(device.compute_capability) < CP_ASYNC_MIN_CC:
                problems.append(f"CACHE=2 (cp.async) needs compute capability 8.0; {device.name} has {device.cc}")
            if config["VEC"] * self.itemsize < 4:
                problems.append(f"CACHE=2 copies 4, 8 or 16 bytes at a time (cp.async); VEC={config['VEC']} "
                                f"{self.dtype} is {config['VEC'] * self.itemsize} B")  # fmt: skip
            if self.shared_bytes(config) + STATIC_SHARED > device.smem_per_block_optin:
                problems.append(f"a shared-memory cache of {self.shared_bytes(config)} B per block exceeds the "
                                f"device's {device.smem_per_block_optin} B")  # fmt: skip
            if config["MAPPING"] == "split" and (config["ITEMS"] * config["BLOCK"] > SPLIT_SMEM_UNROLL
                                                or config["ITEMS"] > SPLIT_SMEM_ITEMS):
                problems.append(f"MAPPING=split with {config['ITEMS']} unrolled shared-memory chunks per thread at "
                                f"{config['BLOCK']} threads spills registers (ITEMS <= {SPLIT_SMEM_ITEMS}, ITEMS x "
                                f"BLOCK <= {SPLIT_SMEM_UNROLL})")  # fmt: skip
        elif config["ITEMS"] != ROW_DEFAULT["ITEMS"]:
            problems.append("ITEMS only matters with CACHE=1 or 2")
        return problems

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        return self.row_constraints(config, shape, device)

    def split_problems(self, config: Config) -> list[str]:
        """Why the family's kernel cannot take MAPPING=split with ``config`` (its stats launch publishes one state
        per block, so the statistics must come from a single pass)."""
        return []

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        """MAPPING=split: the blocks' partial statistics, room for SPLIT_STATE fp32 values per block (a family
        publishing N values per state writes them as [rows][SPLIT][N])."""
        if config.get("MAPPING") != "split":
            return {}
        return {"partials": BufferSpec((shape[0], config["SPLIT"], SPLIT_STATE))}

    def row_launches(self, kernel: str, config: Config, shape: Shape, args: tuple) -> list[Step]:
        """The launch of ``kernel`` over the rows with ``args``; with MAPPING=split, first ``<kernel>_split_stats``
        (x → partials), then ``kernel`` with the partials as its last argument."""
        rows, cols = shape
        grid, block, smem = self.grid(config, rows), (config["BLOCK"], 1, 1), self.shared_bytes(config)
        if config["MAPPING"] != "split":
            return [Launch(kernel, grid, block, smem, args)]
        stats = (*self.split_inputs, "partials", np.int32(rows), np.int32(cols))
        return [Launch(f"{kernel}_split_stats", grid, block, smem, stats),
                Launch(kernel, grid, block, smem, (*args, "partials"))]  # fmt: skip

    def shared_bytes(self, config: Config) -> int:
        """Dynamic shared memory per block: the row's chunks with CACHE=2, else none."""
        if config.get("CACHE") != 2:
            return 0
        return config["ITEMS"] * config["BLOCK"] * config["VEC"] * self.itemsize

    def row_defines(self, config: Config) -> dict[str, int | str]:
        out: dict[str, int | str] = dict(config)
        out["MAPPING"] = MAPPINGS[config["MAPPING"]]
        out["DTYPE"] = dtype_code(self.dtype)
        out["WDTYPE"] = dtype_code(self.wdtype)
        return out

    # --- the rule-based default for untuned shapes ----------------------------------------------------------
    def shape_class(self, shape: Shape) -> tuple:
        """Few long rows (where the rule splits rows over blocks) apart from the rest: neither borrows the other's
        tuned mapping."""
        rows, cols = shape
        return ("few_long_rows",) if rows <= FEW_ROWS and cols >= SPLIT_MIN_COLS else ()

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """`split_rule` for few long rows, else `row_rule`."""
        split = self.split_rule(shape, device)
        return split if split is not None else self.row_rule(shape, device)

    def split_rule(self, shape: Shape, device: DeviceInfo) -> Config | None:
        """MAPPING=split where a block per row would leave SMs idle (the shape class's rows — at most FEW_ROWS, of
        SPLIT_MIN_COLS or more — where they are fewer than the SMs, so that rule and class agree on any GPU):
        SPLIT the largest power of two that keeps the grid within two blocks per SM and gives each of a block's
        threads a vector, 512 threads per block (fewer, down to 128, where that leaves SMs without a block), each
        block's part of the row in registers where it fits, else in shared memory, else read again; None
        elsewhere."""
        rows, cols = shape
        if not self.shape_class(shape) or rows >= device.multiprocessors:
            return None
        vec = widest_vec(self.dtype, 1 << 10, self.domain("VEC"))
        vectors = ceil_div(self.span(cols, vec), vec)
        block = LONG_ROW_BLOCK
        while True:
            split = min(max(self.domain("SPLIT")), _pow2_at_most(2 * device.multiprocessors // rows),
                        _pow2_at_most(vectors // block))  # fmt: skip
            if rows * split >= device.multiprocessors or block <= 128:
                break
            block //= 2  # short rows: smaller blocks, so that every SM gets one
        if split < min(self.domain("SPLIT")):
            return None
        config = {**self.default_config, "MAPPING": "split", "SPLIT": split, "BLOCK": block, "VEC": vec,
                  "ITEMS": _pow2_at_least(ceil_div(vectors, block * split))}  # fmt: skip
        for cache in (1, 2):
            trial = {**config, "CACHE": cache}
            trial.update(self.rule_extra(trial, shape))
            if not self.violations(trial, shape, device):
                return trial
        config.update(CACHE=0, ITEMS=ROW_DEFAULT["ITEMS"])
        config.update(self.rule_extra(config, shape))
        return None if self.violations(config, shape, device) else config

    def row_rule(self, shape: Shape, device: DeviceInfo) -> Config:
        """Threads per row from the row length, 16-byte vectors, and the row kept on chip wherever it fits:

        * up to 8 vectors per lane: a warp per row, the row in registers, rows per block from the row count
          (fewer rows per block where there are few rows, so that every SM gets work);
        * longer rows: a block per row with about 2 vectors per thread (up to 1024 threads), the row in registers
          (fp32, where it fits) or in shared memory (CACHE=2);
        * rows too long for one block's shared memory: a cluster of 512-thread blocks, the fewest blocks that
          hold the row with at most 8 chunks per thread;
        * else 512 threads re-reading the row (its later passes mostly hit L2).
        Measured on the H100 (second session of 2026-11-23): fp16 rows of 50257 and 65536 reached 73-81% of
        the copy bandwidth for softmax and rmsnorm with the row in shared memory, against 53-60% re-reading it
        and less with a cluster caching it in registers (whose barriers then dominate); fp32 rows of 65536 in
        clusters of 4 x 512 threads, 80-84%."""
        rows, cols = shape
        config = dict(self.default_config)
        vec = widest_vec(self.dtype, 1 << 10, self.domain("VEC"))  # any row length keeps 16-byte vectors
        vectors = ceil_div(self.span(cols, vec), vec)
        if vectors <= 32 * 8:
            block = 256
            while block > 64 and ceil_div(rows, block // 32) < 2 * device.multiprocessors:
                block //= 2
            items = _pow2_at_least(ceil_div(vectors, 32))
            config.update(BLOCK=block, MAPPING="warp", VEC=vec, CACHE=1, ITEMS=max(items, 1))
            config.update(self.rule_extra(config, shape))
            if not self.violations(config, shape, device):
                return config
        else:
            block = min(1024, max(128, _pow2_at_least(ceil_div(vectors, 2))))
            config.update(BLOCK=block, MAPPING="block", VEC=vec, ITEMS=_pow2_at_least(ceil_div(vectors, block)))
            # fp32 rows that fit the registers stay there (86-96% of copy at 8192 and 16384 columns on the H200);
            # half rows go to shared memory (fp16 LayerNorm 16384x8192: 88% of copy there on the H100, 52-64%
            # in registers)
            for cache in (1, 2) if self.itemsize == 4 or 2 not in self.domain("CACHE") else (2,):
                config.update(CACHE=cache, **self.rule_extra({**config, "CACHE": cache}, shape))
                if not self.violations(config, shape, device):
                    return config
            for cluster in self.domain("CLUSTER"):  # too long for one block's shared memory
                items = _pow2_at_least(ceil_div(vectors, LONG_ROW_BLOCK * cluster))
                trial = {**config, "MAPPING": "cluster", "CLUSTER": cluster, "BLOCK": LONG_ROW_BLOCK,
                         "ITEMS": items}  # fmt: skip
                trial.update(self.rule_extra(trial, shape))
                if items <= 8 and not self.violations(trial, shape, device):
                    return trial
        if config["MAPPING"] != "warp":
            config["BLOCK"] = LONG_ROW_BLOCK
        config.update(CLUSTER=ROW_DEFAULT["CLUSTER"], CACHE=0, ITEMS=ROW_DEFAULT["ITEMS"])  # read again each pass
        config.update(self.rule_extra(config, shape))
        return config

    def rule_extra(self, config: Config, shape: Shape) -> Config:
        """The family's own parameters in the rule-based default, given the row parameters chosen."""
        return {}

    def defines(self, config: Config) -> dict[str, int | str]:
        return self.row_defines(config)

    def grid(self, config: Config, rows: int) -> tuple[int, int, int]:
        if config["MAPPING"] in ("cluster", "split"):
            return (rows * self.blocks_per_row(config), 1, 1)  # consecutive blocks share a row
        return (ceil_div(rows, config["BLOCK"] // self.threads_per_row(config)), 1, 1)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def _pow2_at_most(n: int) -> int:
    return 1 << max(0, int(n).bit_length() - 1)
