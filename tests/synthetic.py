"""A synthetic replay recording for the driver's bookkeeping tests (counts, duplicates, resume, ranking).

Its times are a made-up deterministic function of the configuration: good for checking what the driver
records, useless for judging a sampler. Sampler behaviour is tested on real GPU recordings (tests/data/).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from autotune.spaces import config_key, get_space
from autotune.spaces.enumeration import valid_configs
from autotune.tuning.evaluation import Measurement, RecordedMeasurements, Timing, Toolchain

from conftest import H200

# A narrowed gemm space holding the default configuration.
DOMAINS = {
    "ALGO": ["simt"],
    "BM": [64, 128],
    "BN": [64, 128],
    "BK": [8, 16],
    "WARPS_M": [1, 2],
    "WARPS_N": [2, 4],
    "TM": [4, 8],
    "TN": [4],
    "WNITER": [1, 2],
    "VEC": [4],
    "A_TRANS": [1],
    "A_PAD": [0, 4],
    "PIPELINE": ["double", "cp.async-3"],
    "GROUP_M": [1, 8],
    "MIN_BLOCKS": [1],
}
SHAPE = (1024, 1024, 1024)


def fake_time(key: str) -> float:
    return 0.5 + int(hashlib.sha256(key.encode()).hexdigest()[:6], 16) / 0xFFFFFF


def record_every_config(path: Path, kernel: str, shape: tuple) -> RecordedMeasurements:
    """A recording of every valid configuration of ``kernel`` (a name or a file reference) at ``shape`` on an
    H200, with made-up times: lets a search of a kernel of one's own run on CPU (``--replay``)."""
    space = get_space(kernel)
    domains = {p.key: list(p.values) for p in space.parameters}
    rec = RecordedMeasurements(kernel=space.name, shape=shape, device=H200, toolchain=Toolchain(nvcc="13.0.88"),
                               template_hash=space.template_hash(), domains=domains, dtype=space.dtype)  # fmt: skip
    for config in valid_configs(space, shape, H200):
        t = fake_time(config_key(config))
        rec.add(config, Measurement(ok=True, timing=Timing(t, t * 0.98, t * 0.99, t * 1.01, t * 1.05, 20),
                                    registers=32))  # fmt: skip
    rec.save(path)
    return rec


def make_recording(path: Path, domains: dict = DOMAINS, shape: tuple = SHAPE) -> RecordedMeasurements:
    space = get_space("gemm", domains)
    rec = RecordedMeasurements(
        kernel="gemm",
        shape=shape,
        device=H200,
        toolchain=Toolchain(nvcc="13.0.88"),
        template_hash=space.template_hash(),
        domains=domains,
    )
    for config in valid_configs(space, shape, H200):
        key = config_key(config)
        if config["BK"] == 16 and config["A_PAD"] == 0 and config["GROUP_M"] == 8:
            m = Measurement.failed("wrong", "C at 333x268x100: relative error 3.1e-02 > 1e-04", registers=90)
        elif config["PIPELINE"] == "cp.async-3" and config["TM"] == 8 and config["BM"] == 64:
            m = Measurement.failed("compile", "error: too many resources (synthetic)")
        else:
            t = fake_time(key)
            m = Measurement(ok=True, timing=Timing(t, t * 0.98, t * 0.99, t * 1.01, t * 1.05, 20), registers=100)
        rec.add(config, m)
    rec.save(path)
    return rec
