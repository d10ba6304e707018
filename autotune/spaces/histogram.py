"""Histogram of int32 values into B bins: counts = base + bincount(values) (template: histogram.cu).

The problem is (n values, B bins). B comes from the ``base`` array the caller passes (the counts to add to:
zeros for a plain histogram, a running histogram to accumulate batches): a flat array of values alone does not
say how many bins there are.

**Out-of-range values are dropped**: a value < 0 or ≥ B counts in no bin and writes nothing (one unsigned
comparison per value), as ``torch.bincount`` would with its result cut to B bins. The validation inputs hold
negative values, values ≥ B and the int32 extremes, so a kernel that wrote them anywhere fails.

Tunables: shared-memory privatised bins (each block counts privately, then adds its non-zero bins) vs global
atomics for every value; copies of the shared bins per block (less contention where values crowd into few
bins); block size, int4/int2/int loads, loads in flight, grid size.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces._vectors import block_problems
from autotune.spaces.base import BufferSpec, Config, KernelSpace, Launch, Param, Step, ceil_div

INT_MIN, INT_MAX = -(2**31), 2**31 - 1


class HistogramSpace(KernelSpace):
    name = "histogram"
    template = "histogram.cu"
    dims = ("n", "bins")
    default_shape = (1 << 24, 256)
    metric_unit = "GB/s"
    dtypes = ("int32",)
    parameters = (
        Param("BLOCK", (128, 256, 512, 1024), "threads per block"),
        Param("VEC", (1, 2, 4), "values per load (int, int2, int4)"),
        Param("ITEMS", (1, 2, 4, 8), "vectors per thread per step"),
        Param("SMEM", (0, 1), "1: bins privatised in shared memory per block; 0: a global atomic per value"),
        Param("REPLICAS", (1, 2, 4, 8), "copies of the shared bins per block (SMEM=1)"),
        Param("BLOCKS_PER_SM", (1, 2, 4, 8, 16), "grid size, in blocks per SM"),
    )
    default_config = {"BLOCK": 256, "VEC": 4, "ITEMS": 2, "SMEM": 1, "REPLICAS": 1, "BLOCKS_PER_SM": 4}

    @staticmethod
    def shared_bytes(config: Config, bins: int) -> int:
        return 4 * bins * config["REPLICAS"] if config["SMEM"] else 0

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        n, bins = shape
        problems = block_problems(config["BLOCK"], device)
        if not config["SMEM"] and config["REPLICAS"] != 1:
            problems.append("REPLICAS only matters with SMEM=1")
        smem = self.shared_bytes(config, bins)
        if smem > device.smem_per_block_optin:
            problems.append(f"{bins} bins x {config['REPLICAS']} copies need {smem} B of shared memory > "
                            f"{device.smem_per_block_optin} B")  # fmt: skip
        return problems

    def defines(self, config: Config) -> dict[str, int | str]:
        return {k: v for k, v in config.items() if k != "BLOCKS_PER_SM"}

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """Privatised bins where they fit shared memory (four copies for small B: uniform values then contend
        less), global atomics otherwise."""
        n, bins = shape
        config = {**self.default_config, "ITEMS": 4, "BLOCKS_PER_SM": 4, "REPLICAS": 4 if bins <= 1024 else 1}
        if self.violations(config, shape, device):
            config.update(SMEM=0, REPLICAS=1)
        return config

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        n, bins = shape
        needed = ceil_div(max(n // config["VEC"], 1), config["BLOCK"] * config["ITEMS"])
        grid = max(1, min(needed, config["BLOCKS_PER_SM"] * device.multiprocessors))
        return [
            Launch("histogram_init", (ceil_div(bins, 256), 1, 1), (256, 1, 1), 0, ("base", "counts", np.int32(bins))),
            Launch("histogram", (grid, 1, 1), (config["BLOCK"], 1, 1), self.shared_bytes(config, bins),
                   ("values", np.int64(n), "counts", np.int32(bins))),
        ]  # fmt: skip

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        n, bins = shape
        return {"values": BufferSpec((n,), "int32"), "base": BufferSpec((bins,), "int32")}

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        return {"counts": BufferSpec((shape[1],), "int32")}

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Values mostly in range, some negative, some ≥ bins, and the int32 extremes; base counts non-zero."""
        n, bins = shape
        values = rng.integers(-(bins // 8) - 1, bins + bins // 8 + 1, size=n)
        extremes = rng.random(n) < 0.01
        values[extremes] = rng.choice([INT_MIN, INT_MAX, -1, bins], size=int(extremes.sum()))
        return {"values": values.astype(np.int32), "base": rng.integers(1, 100, size=bins).astype(np.int32)}

    def reference(self, inputs, shape):
        n, bins = shape
        values = np.asarray(inputs["values"], np.int64)
        kept = values[(values >= 0) & (values < bins)]
        return {"counts": (np.asarray(inputs["base"], np.int64) + np.bincount(kept, minlength=bins)).astype(np.float64)}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        values, base = inputs["values"], inputs["base"]
        if len(values) != 1 or values[0] == 0:
            raise InvalidArgument(f"values must be a non-empty 1-D array, got shape {tuple(values)}")
        if len(base) != 1 or base[0] == 0:
            raise InvalidArgument(f"base must be a 1-D array of the B bins' starting counts, got shape {tuple(base)}")
        return (values[0], base[0])

    def tolerance(self, output: str, shape: Shape) -> float:
        return 0.0  # counts are exact

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        return [(1, 1), (7, 3), (1031, 256), (1_000_003, 5), (100_003, shape[1])]

    def work(self, shape: Shape) -> float:
        n, bins = shape
        return 4.0 * (n + 2 * bins)
