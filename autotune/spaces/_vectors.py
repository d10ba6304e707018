"""What the memory-bound spaces share besides their dtype rules (`_precision`): the checks of a block size and
of a vector width, their common tunables, and the bases of the spaces over one flat array.

* `block_problems` / `vector_problems` (`access_problems`: both): every memory-bound space (elementwise,
  reductions, dot, GEMV, the row kernels) launches BLOCK threads per block and loads VEC elements at a time.
* `VectorSpace`: a space over one array of n elements (``x``, and ``y`` of the same shape for binary kernels),
  one template whose defines are the parameters less the grid size, with OP where the template serves several
  kernels (elementwise, reduce, dot).
* `TwoPassSpace`: a `VectorSpace` that reduces the array to one fp32 value, its blocks combining by atomics into
  the result or by per-block partials and a second launch (reduce, dot): its launch plan and workspace.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._precision import VECTOR_BYTES, dtype_code, widest_vec
from autotune.spaces.base import BufferSpec, Config, KernelSpace, Launch, Param, Step, Zero, ceil_div

BLOCK = Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block")
VEC = Param("VEC", (1, 2, 4, 8), "elements per load (16 B at most)")
ITEMS = Param("ITEMS", (1, 2, 4, 8), "vectors per thread per step")
TWO_PASS = Param("TWO_PASS", (0, 1), "0: atomics into the result; 1: per-block partials and a second launch")
BLOCKS_PER_SM = Param("BLOCKS_PER_SM", (1, 2, 4, 8, 16, 32), "grid size, in blocks per SM")
MAX_GRID_PER_SM = 1024  # blocks per SM the partials are sized for: more than any device's grid could use


def block_problems(block: int, device: DeviceInfo) -> list[str]:
    """Why ``block`` threads cannot form a block on ``device`` (empty when they can)."""
    return [f"{block} threads per block > device limit"] if block > device.max_threads_per_block else []


def vector_problems(vec: int, dtype: str) -> list[str]:
    """Why loads of ``vec`` elements of ``dtype`` are too wide (empty when they are not)."""
    width = vec * dtypes.dtype(dtype).itemsize
    return [f"VEC={vec} {dtype} is {width} B per access (> {VECTOR_BYTES})"] if width > VECTOR_BYTES else []


def access_problems(config: Mapping[str, Any], dtype: str, device: DeviceInfo) -> list[str]:
    """The block size, then the vector width, of a configuration with ``BLOCK`` and ``VEC``."""
    return block_problems(config["BLOCK"], device) + vector_problems(config["VEC"], dtype)


class VectorSpace(KernelSpace):
    """A space over one array of ``n`` elements of the problem's dtype (see the module)."""

    dims = ("n",)
    default_shape = (1 << 24,)
    metric_unit = "GB/s"
    dtypes = dtypes.FLOAT_DTYPES
    arity: ClassVar[int] = 1  # inputs: x, and y of x's shape where 2
    op: ClassVar[int | None] = None  # the template's OP, where one template computes several kernels

    @property
    def itemsize(self) -> int:
        return dtypes.dtype(self.dtype).itemsize

    def defines(self, config: Config) -> dict[str, int | str]:
        """The parameters less the grid size (a launch choice), OP where there is one, and DTYPE."""
        out: dict[str, int | str] = {k: v for k, v in config.items() if k != "BLOCKS_PER_SM"}
        if self.op is not None:
            out["OP"] = self.op
        out["DTYPE"] = dtype_code(self.dtype)
        return out

    def blocks_needed(self, config: Config, n: int) -> int:
        """Blocks that cover ``n`` elements in one step of BLOCK threads × ITEMS vectors of VEC."""
        return ceil_div(max(n // config["VEC"], 1), config["BLOCK"] * config["ITEMS"])

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        specs = {"x": BufferSpec(shape, self.dtype)}
        if self.arity == 2:
            specs["y"] = BufferSpec(shape, self.dtype)
        return specs

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        x = inputs["x"]
        if len(x) != 1:
            raise InvalidArgument(f"x must be 1-D (flatten it: x.reshape(-1)), got shape {tuple(x)}")
        if x[0] == 0:
            raise InvalidArgument("x is empty")
        if self.arity == 2 and tuple(inputs["y"]) != tuple(x):
            raise InvalidArgument(f"y has shape {tuple(inputs['y'])}, x has {tuple(x)}: they must match")
        return (x[0],)


class TwoPassSpace(VectorSpace):
    """A `VectorSpace` reduced to one fp32 value ``out`` by a grid of BLOCKS_PER_SM blocks per SM (at most what
    the array needs), combined by atomics or, with TWO_PASS=1, by a second launch over per-block ``partials``.
    The template's kernels: ``<kernels>_main`` (the inputs, n, the result, where blocks combine) and
    ``<kernels>_final`` (partials, their count, the result)."""

    kernels: ClassVar[str]  # the prefix of the template's kernel names

    def init_steps(self) -> list[Step]:
        """What readies ``out`` for the blocks' atomics (by default: zeroing it)."""
        return [Zero("out")]

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        (n,) = shape
        block = (config["BLOCK"], 1, 1)
        grid = self.grid(config, n, device)
        main = f"{self.kernels}_main"
        inputs = tuple(self.input_specs(shape))
        if config["TWO_PASS"]:
            return [
                Launch(main, (grid, 1, 1), block, 0, (*inputs, np.int64(n), "out", "partials")),
                Launch(f"{self.kernels}_final", (1, 1, 1), block, 0, ("partials", np.int32(grid), "out")),
            ]
        return [*self.init_steps(), Launch(main, (grid, 1, 1), block, 0, (*inputs, np.int64(n), "out", "out"))]

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        return access_problems(config, self.dtype, device)

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """16-byte vectors, four per thread per step in flight, eight blocks per SM (not more than the data
        needs)."""
        vec = widest_vec(self.dtype, 1 << 10, self.domain("VEC"))  # the pointers are checked at run time
        return {**self.default_config, "VEC": vec, "ITEMS": 4, "BLOCKS_PER_SM": 8}

    def grid(self, config: Config, n: int, device: DeviceInfo) -> int:
        return max(1, min(self.blocks_needed(config, n), config["BLOCKS_PER_SM"] * device.multiprocessors))

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        # Sized for the largest grid any device could use with this config; only `grid` entries are written.
        if not config["TWO_PASS"]:
            return {}
        return {"partials": BufferSpec((config["BLOCKS_PER_SM"] * MAX_GRID_PER_SM,))}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"out": BufferSpec((1,))}

    def tolerance(self, output: str, shape: Shape) -> float:
        # fp32 partial sums (of positive terms: the validation inputs of sum and dot): rounding grows like the
        # square root of the terms each partial accumulates.
        return 1e-6 + 4e-8 * math.sqrt(shape[0])

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1,), (7,), (1031,), (1_000_003,)]
