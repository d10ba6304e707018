"""What the row kernels (softmax, layernorm, rmsnorm) share: the tunables of kernel_templates/rows.cuh.

A group of threads owns each row — a warp (several rows per block) or the whole block — reads it in vectors,
and may keep it in registers between passes. Caching is valid only for rows that fit the cache: the constraint
depends on the shape, so the dispatcher picks, for an untuned shape, a tuned configuration that fits it.
"""

from __future__ import annotations

from typing import Mapping

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace, Param, ceil_div

MAPPINGS = {"warp": 0, "block": 1}
BASE_REGISTERS = 40  # registers a row kernel uses besides its cache (measured with ptxas: 26 to 57)

ROW_PARAMETERS = (
    Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
    Param("MAPPING", tuple(MAPPINGS), "a warp per row (several rows per block) or the whole block per row"),
    Param("VEC", (1, 2, 4), "floats per access (scalar fall-back where rows are unaligned)"),
    Param("CACHE", (0, 1), "keep the row in registers between passes (1) or read it again (0)"),
    Param("ITEMS", (1, 2, 4, 8, 16, 32), "chunks of VEC floats each thread caches (with CACHE=1)"),
    Param("STREAM", (0, 1), "streaming loads/stores (__ldcs/__stcs)"),
)
ROW_DEFAULT = {"BLOCK": 256, "MAPPING": "warp", "VEC": 4, "CACHE": 0, "ITEMS": 8, "STREAM": 0}  # any shape


class RowSpace(KernelSpace):
    dims = ("rows", "cols")
    default_shape = (4096, 4096)
    metric_unit = "GB/s"

    @staticmethod
    def threads_per_row(config: Config) -> int:
        return 32 if config["MAPPING"] == "warp" else config["BLOCK"]

    def row_constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        rows, cols = shape
        problems = []
        if config["BLOCK"] > device.max_threads_per_block:
            problems.append(f"{config['BLOCK']} threads per block > device limit")
        if config["CACHE"]:
            capacity = self.threads_per_row(config) * config["VEC"] * config["ITEMS"]
            if cols > capacity:
                problems.append(f"rows of {cols} do not fit the register cache of {capacity} floats")
            cap = min(255, device.registers_per_multiprocessor // config["BLOCK"])
            if config["ITEMS"] * config["VEC"] + BASE_REGISTERS > cap:
                problems.append(f"a cache of {config['ITEMS'] * config['VEC']} floats per thread exceeds the "
                                f"{cap} registers a {config['BLOCK']}-thread block allows")  # fmt: skip
        elif config["ITEMS"] != ROW_DEFAULT["ITEMS"]:
            problems.append("ITEMS only matters with CACHE=1")
        return problems

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        return self.row_constraints(config, shape, device)

    def row_defines(self, config: Config) -> dict[str, int | str]:
        out: dict[str, int | str] = dict(config)
        out["MAPPING"] = MAPPINGS[config["MAPPING"]]
        return out

    def defines(self, config: Config) -> dict[str, int | str]:
        return self.row_defines(config)

    def grid(self, config: Config, rows: int) -> tuple[int, int, int]:
        return (ceil_div(rows, config["BLOCK"] // self.threads_per_row(config)), 1, 1)

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
