"""LayerNorm backward: dx, dweight, dbias from dy, x, weight and the forward's mean and rstd
(template: layernorm_backward.cu; RMSNorm's backward, `autotune.spaces.rmsnorm_backward`, shares it).

dy, x, dx in float32, float16 or bfloat16; weight, dweight, dbias in the same dtype, or in fp32 with half x
(``layernorm_backward_mixed``); mean, rstd and every sum in fp32 (the per-block partials of dweight/dbias are fp32
buffers; atomics need fp32 dweight/dbias, so ATOMIC=1 is valid only where the weights are fp32).

Tunables: block size, vector width, columns per thread, rows per block, fused (whole row per block) or split
(row sums first, then column tiles: any width), and how dweight/dbias are reduced across rows: atomics, or
per-block partials and a second pass.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._precision import dtype_code, widest_vec
from autotune.spaces._rows import RowSpace
from autotune.spaces._vectors import block_problems, vector_problems
from autotune.spaces.base import BufferSpec, Config, Launch, Param, Step, Zero, ceil_div
from autotune.spaces.layernorm import EPS, layernorm_inputs, row_stats

REGISTERS_PER_FLOAT = 5  # per column a thread owns: dw, db and weight sums, g and x̂ of the current row
BASE_REGISTERS = 40


class LayerNormBackwardSpace(RowSpace):
    name = "layernorm_backward"
    template = "layernorm_backward.cu"
    mixed_variant = "layernorm_backward_mixed"
    rms: ClassVar[bool] = False  # RMSNorm's backward: no mean, no dbias
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
        problems += vector_problems(config["VEC"], self.dtype)
        if config["ATOMIC"] and self.wdtype != "float32":
            problems.append(f"ATOMIC=1 accumulates into fp32 only; dweight is {self.wdtype}")
        return problems

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**config, "DTYPE": dtype_code(self.dtype), "WDTYPE": dtype_code(self.wdtype), "RMS": int(self.rms)}

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """The widest aligned vector; the smallest block whose tile holds the row in two chunks per thread (whole
        rows per block, no row-sum launch), else split tiles; rows per block so that about four blocks per SM
        share the rows."""
        rows, cols = shape
        vec = widest_vec(self.dtype, cols, self.domain("VEC"))
        config = {**self.default_config, "VEC": vec, "ITEMS": 2}
        fits = [b for b in self.domain("BLOCK") if b >= 128 and b * vec * 2 >= cols]
        if fits:
            config.update(BLOCK=fits[0], SPLIT=0)
        else:
            config.update(BLOCK=256, SPLIT=1)
        tiles = ceil_div(cols, config["BLOCK"] * vec * 2)
        wanted = ceil_div(rows * tiles, 4 * device.multiprocessors)
        config["RPB"] = max([r for r in self.domain("RPB") if r <= max(wanted, 1)], default=1)
        if self.violations(config, shape, device):
            return dict(self.default_config)
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
            if not self.rms:
                space["partial_db"] = BufferSpec((parts, cols))
        return space

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        rows, cols = shape
        block = (config["BLOCK"], 1, 1)
        r, c = np.int32(rows), np.int32(cols)
        # RMSNorm has no mean and no dbias: those arguments name a buffer the kernels never touch under RMS=1.
        mean = "rstd" if self.rms else "mean"
        dbias, partial_db = ("dweight", "partial_dw") if self.rms else ("dbias", "partial_db")
        steps: list[Step] = []
        if config["ATOMIC"]:
            steps += [Zero("dweight")] + ([] if self.rms else [Zero("dbias")])
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

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"dy": self.elem(shape), "x": self.elem(shape), "weight": self.weight(cols),
                "mean": BufferSpec((rows,)), "rstd": BufferSpec((rows,))}  # fmt: skip

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        forward = layernorm_inputs(shape, rng, self.dtype, self.wdtype)
        mean, rstd = row_stats(dtypes.decode(forward["x"], self.dtype))  # what the forward hands to the backward
        return {
            "dy": dtypes.encode(rng.standard_normal(shape), self.dtype),
            "x": forward["x"],
            "weight": forward["weight"],
            "mean": mean.astype(np.float32),
            "rstd": rstd.astype(np.float32),
        }

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        dy = inputs["dy"]
        if len(dy) != 2 or 0 in dy:
            raise InvalidArgument(f"dy must be a non-empty 2-D (rows, cols) array, got shape {tuple(dy)}")
        rows, cols = dy
        expected = {"x": (rows, cols), "weight": (cols,), "mean": (rows,), "rstd": (rows,)}
        for name, want in expected.items():
            if name not in inputs:
                continue
            if tuple(inputs[name]) != want:
                raise InvalidArgument(f"{name} has shape {tuple(inputs[name])}, expected {want} for dy {tuple(dy)}")
        return (rows, cols)

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        rows, cols = shape
        return {"dx": self.elem(shape), "dweight": self.weight(cols), "dbias": self.weight(cols)}

    def reference(self, inputs, shape):
        dy = inputs["dy"].astype(np.float64)
        mean = inputs["mean"].astype(np.float64)[:, None]
        rstd = inputs["rstd"].astype(np.float64)[:, None]
        xhat = (inputs["x"].astype(np.float64) - mean) * rstd
        g = dy * inputs["weight"].astype(np.float64)
        dx = rstd * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
        return {"dx": dx, "dweight": (dy * xhat).sum(axis=0), "dbias": dy.sum(axis=0)}

    def fp32_tolerance(self, output: str, shape: Shape) -> float:
        return 2e-5

    def zero_tolerance(self, output: str, shape: Shape) -> float:
        # dx is exactly 0 for rows of length 1 (x̂ = 0, g - mean(g) = 0); a last-bit difference between g and
        # its row sum is then amplified by rstd, up to 1/sqrt(eps).
        return self.tolerance(output, shape) / EPS**0.5

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1, 1), (7, 1), (3, 7), (5, 1031), (2, 65539), (37, shape[1])]

    def work(self, shape: Shape) -> float:
        rows, cols = shape
        weights = len(self.outputs(shape))  # weight read; dweight (and dbias) written
        stats = len(self.input_specs(shape)) - 3  # mean and rstd, or rstd alone
        return (self.itemsize * 3.0 * rows * cols + dtypes.dtype(self.wdtype).itemsize * weights * cols
                + 4.0 * stats * rows)


class LayerNormBackwardMixedSpace(LayerNormBackwardSpace):
    """LayerNorm backward of half dy, x with fp32 weight, dweight, dbias (mixed-precision training)."""

    name = "layernorm_backward_mixed"
    dtypes = ("float16", "bfloat16")
    weight_dtype = "float32"
    mixed_variant = ""
