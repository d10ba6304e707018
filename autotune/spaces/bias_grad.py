"""The bias gradient of a Linear layer, alone and fused with the backward of a tanh-GELU (template: column_sum.cu).

* ``bias_grad``: dbias[n] = Σ_m dC[m, n] over dC of shape (M, N), row-major; dbias in dC's dtype (as torch's
  ``dC.sum(0)``), summed in fp32.
* ``gelu_bias_grad``: the backward of y = gelu_tanh(pre) followed by the bias gradient: dpre = dy · gelu_tanh'(pre),
  computed in fp32 and rounded once to the dtype, and dbias[n] = Σ_m dpre[m, n], summed over the fp32 values of
  dpre before they are rounded (not over the stored dpre: one rounding less than ``dpre.sum(0)`` in torch).

dtype: float32, float16 or bfloat16, the same for every buffer; every sum in fp32.

Two launches, deterministic (no atomics; every sum in a fixed order): ``column_sum`` over a grid of column strips
(32·VEC columns each) × SPLITS row ranges (ROWS_PER_BLOCK rows each), each block writing one fp32 partial row of
the workspace ``partials`` (SPLITS × N), then ``column_sum_finalize``, a thread per column adding the SPLITS partial
rows in order. Tunables: VEC (columns per lane, 16 B at most), WARPS (per block), ROWS_PER_BLOCK.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._gelu import gelu_tanh_grad
from autotune.spaces._precision import dtype_code, output_tolerance, widest_vec
from autotune.spaces._vectors import block_problems, vector_problems
from autotune.spaces.base import BufferSpec, Config, KernelSpace, Launch, Param, Step, ceil_div

MAX_SPLITS = 65535  # the grid's y extent: row ranges of one column strip
FINALIZE_THREADS = 128  # per block of column_sum_finalize: narrow rows (768 columns) still spread over 6 SMs
RULE_BLOCKS_PER_SM = 2  # the rule's target: enough blocks that every SM has two (a tail, and latency to hide)
# fp32 outputs: each lane adds at most 1024/4 = 256 rows in turn, then the warps and the splits are added: 2e-7 to
# 8e-7 of ‖dbias‖ on the validation shapes in an emulation of that order (tests/test_spaces_bias_grad.py); dpre is
# one product and gelu' through one expf and a division (a few ulp, kernel_templates/gelu.cuh). 1e-5 leaves room
# for fma contractions and is the row kernels' fp32 tolerance.
# Half outputs: `_precision.HALF_TOLERANCE` (one rounding of the fp32 value costs at most 2^-11 or 2^-8 of it).
FP32_TOLERANCE = 1e-5


class _ColumnSum(KernelSpace):
    """What both families share: the tunables, constraints, rule, launch plan and workspace (see the module)."""

    template = "column_sum.cu"
    dims = ("M", "N")
    default_shape = (8192, 768)
    dtypes = dtypes.FLOAT_DTYPES
    metric_unit = "GB/s"
    op: ClassVar[int]  # the template's OP
    sources: ClassVar[tuple[str, ...]]  # column_sum's matrix arguments, in order (inputs, then written)

    parameters = (
        Param("VEC", (1, 2, 4, 8), "columns per lane: one access of 16 B at most (scalars where N or a pointer is "
              "not aligned)"),
        Param("WARPS", (4, 8, 16), "warps per block, each adding every WARPS-th row of the block's"),
        Param("ROWS_PER_BLOCK", (32, 64, 128, 256, 512, 1024), "rows per block: SPLITS = ceil(M / ROWS_PER_BLOCK) "
              "partial rows"),
    )
    default_config = {"VEC": 4, "WARPS": 8, "ROWS_PER_BLOCK": 128}

    @property
    def itemsize(self) -> int:
        return dtypes.dtype(self.dtype).itemsize

    @staticmethod
    def splits(config: Config, shape: Shape) -> int:
        """Row ranges (blocks per column strip, and rows of the partials)."""
        return ceil_div(shape[0], config["ROWS_PER_BLOCK"])

    # --- constraints and rendering --------------------------------------------------------------------------
    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        problems = block_problems(32 * config["WARPS"], device) + vector_problems(config["VEC"], self.dtype)
        if self.splits(config, shape) > MAX_SPLITS:
            problems.append(f"{self.splits(config, shape)} row ranges of ROWS_PER_BLOCK={config['ROWS_PER_BLOCK']} "
                            f"exceed the grid's {MAX_SPLITS} in y")  # fmt: skip
        return problems

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**config, "OP": self.op, "DTYPE": dtype_code(self.dtype)}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        splits = self.splits(config, shape)
        strips = ceil_div(cols, 32 * config["VEC"])
        return [
            Launch("column_sum", (strips, splits, 1), (32 * config["WARPS"], 1, 1), 0,
                   (*self.sources, "partials", np.int32(rows), np.int32(cols))),
            Launch("column_sum_finalize", (ceil_div(cols, FINALIZE_THREADS), 1, 1), (FINALIZE_THREADS, 1, 1), 0,
                   ("partials", "dbias", np.int32(splits), np.int32(cols))),
        ]  # fmt: skip

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        return {"partials": BufferSpec((self.splits(config, shape), shape[1]))}  # fp32, every row written

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """16-byte vectors (kept where N is unaligned: the lanes' scalar loads still have VEC columns in flight),
        8 warps, and the most rows per block that still give `RULE_BLOCKS_PER_SM` blocks per SM (fewer partial
        rows to write and add up); the fewest rows per block where no choice gets there. E.g. 8192×768 bf16 on
        132 SMs: 3 strips of 256 columns × 128 ranges of 64 rows, 384 blocks."""
        rows, cols = shape
        vec = widest_vec(self.dtype, 1 << 10, self.domain("VEC"))  # divides 1024: the widest of 16 B at most
        warps = 8 if 8 in self.domain("WARPS") else max(self.domain("WARPS"))
        strips = ceil_div(cols, 32 * vec)
        fitting = [r for r in self.domain("ROWS_PER_BLOCK") if ceil_div(rows, r) <= MAX_SPLITS]
        enough = [r for r in fitting if strips * ceil_div(rows, r) >= RULE_BLOCKS_PER_SM * device.multiprocessors]
        per_block = max(enough) if enough else min(fitting, default=max(self.domain("ROWS_PER_BLOCK")))
        return {"VEC": vec, "WARPS": warps, "ROWS_PER_BLOCK": per_block}

    # --- problems and correctness ---------------------------------------------------------------------------
    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        names = list(self.input_specs((1, 1)))
        first = tuple(inputs[names[0]])
        if len(first) != 2 or 0 in first:
            raise InvalidArgument(f"{names[0]} must be a non-empty 2-D (M, N) array, got shape {first}")
        for name in names[1:]:
            if name in inputs and tuple(inputs[name]) != first:
                raise InvalidArgument(f"{name} has shape {tuple(inputs[name])}, {names[0]} has {first}: they must "
                                      "match")  # fmt: skip
        return first

    def tolerance(self, output: str, shape: Shape) -> float:
        return output_tolerance(self.outputs(shape)[output].dtype, FP32_TOLERANCE)

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        # One row, columns of 1, N no multiple of any VEC (scalar path), a row of 65539 columns (257 strips),
        # ragged row ranges over many splits, and very many rows of 3 columns.
        return [(1, 1), (7, 1), (3, 7), (5, 1031), (2, 65539), (3001, 1031), (20001, 3)]


class BiasGradSpace(_ColumnSum):
    name = "bias_grad"
    leading_dims = {"dC": 2}
    op = 0
    sources = ("dC",)

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"dC": BufferSpec(tuple(shape), self.dtype)}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"dbias": BufferSpec((shape[1],), self.dtype)}

    def reference(self, inputs, shape):
        return {"dbias": inputs["dC"].astype(np.float64).sum(axis=0)}

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        return self.itemsize * (float(rows) * cols + cols)  # dC read, dbias written


class GeluBiasGradSpace(_ColumnSum):
    name = "gelu_bias_grad"
    leading_dims = {"dy": 2, "pre": 2, "dpre": 2}
    op = 1
    sources = ("dy", "pre", "dpre")

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"dy": BufferSpec(tuple(shape), self.dtype), "pre": BufferSpec(tuple(shape), self.dtype)}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        # pre over both signs and up to |x| = 5: gelu' rises from ~0 through its minimum (x ≈ -0.75) and overshoot
        # (x ≈ 1.6) to 1, and tanh saturates (1 - t² and 1 + t cancel) at its ends.
        return {"dy": dtypes.encode(rng.uniform(-1.0, 1.0, size=shape), self.dtype),
                "pre": dtypes.encode(rng.uniform(-5.0, 5.0, size=shape), self.dtype)}  # fmt: skip

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"dpre": BufferSpec(tuple(shape), self.dtype), "dbias": BufferSpec((shape[1],), self.dtype)}

    def reference(self, inputs, shape):
        dpre = inputs["dy"].astype(np.float64) * gelu_tanh_grad(inputs["pre"].astype(np.float64))
        return {"dpre": dpre, "dbias": dpre.sum(axis=0)}

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        return self.itemsize * (3.0 * rows * cols + cols)  # dy, pre read, dpre and dbias written
