"""A test-only kernel space whose FAULT parameter injects each way a candidate can go wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autotune.spaces.base import Config, Launch, Param, Step, ceil_div
from autotune.spaces.gemm import GemmSpace

FAULTS = {"none": 0, "crash": 1, "hang": 2, "wrong_odd_m": 3, "compile": 4, "no_launch": 5, "nan": 6}
EXPECTED_FAILURE = {"crash": "crash", "hang": "timeout", "wrong_odd_m": "wrong", "compile": "compile",
                    "no_launch": "launch", "nan": "nan"}  # fmt: skip


class FaultyGemmSpace(GemmSpace):
    name = "faulty_gemm"
    template = Path(__file__).with_name("faulty_gemm.cu")
    algorithms = ()  # one template with its own parameters, not gemm's algorithms
    default_shape = (256, 256, 256)
    parameters = (
        Param("FAULT", tuple(FAULTS)),
        Param("TILE", (8, 16, 32)),
        Param("UNROLL", (1, 4, 8)),
    )
    default_config = {"FAULT": "none", "TILE": 16, "UNROLL": 1}

    def validation_cases(self, shape):
        return [((333, 268, 100), "uniform"), ((67, 131, 33), "uniform")]  # a naive kernel: no long-K cases

    def tolerance(self, output, shape):
        return 1e-4

    def constraints(self, config, shape, device):
        return []  # let every fault reach the GPU

    def defines(self, config: Config) -> dict:
        return {"FAULT": FAULTS[config["FAULT"]], "TILE": config["TILE"], "UNROLL": config["UNROLL"]}

    def launches(self, config: Config, shape, device) -> list[Step]:
        m, n, k = shape
        tile = config["TILE"]
        threads = 2048 if config["FAULT"] == "no_launch" else tile * tile  # over every GPU's 1024 limit
        return [
            Launch("sgemm", (ceil_div(n, tile), ceil_div(m, tile), 1), (threads, 1, 1), 0,
                   ("A", "B", "C", np.int32(m), np.int32(n), np.int32(k)))
        ]  # fmt: skip

    def describe(self, config: Config) -> str:
        return f"FAULT={config['FAULT']} TILE={config['TILE']} UNROLL={config['UNROLL']}"
