"""A toy kernel family with two algorithms (its templates exist but are never compiled: the synthetic evaluator runs it): the driver's define-by-run search over a
conditional space, tested on synthetic recorded times."""

from __future__ import annotations

import hashlib

import numpy as np

from autotune.spaces import Algorithm, BufferSpec, KernelSpace, Launch, Param, config_key
from autotune.spaces.enumeration import valid_configs
from autotune.tuning.evaluation import Measurement, RecordedMeasurements, Timing, Toolchain

from conftest import H200


class Tiled(Algorithm):
    name = "tiled"
    template = "toy_tiled.cu"
    dtypes = ("float32", "float16")
    parameters = (Param("TILE", (16, 32, 64, 128)), Param("UNROLL", (1, 2, 4)))
    default_config = {"TILE": 32, "UNROLL": 1}

    def constraints(self, config, shape, device):
        return ["TILE=128 with UNROLL=4 would spill"] if (config["TILE"], config["UNROLL"]) == (128, 4) else []

    def launches(self, config, shape, device):
        return [Launch("toy", (1, 1, 1), (config["TILE"], 1, 1), 0, ("x", "y", np.int32(shape[0])))]


class Vector(Algorithm):
    name = "vector"
    template = "toy_vector.cu"
    dtypes = ("float16",)
    min_cc = (9, 0)
    parameters = (Param("TILE", (64, 256)), Param("VEC", (2, 4, 8)))  # a TILE of its own domain
    default_config = {"TILE": 64, "VEC": 8}

    def constraints(self, config, shape, device):
        return []

    def launches(self, config, shape, device):
        return [Launch("toy_vec", (1, 1, 1), (config["TILE"], 1, 1), 0, ("x", "y", np.int32(shape[0])))]


class ToyFamily(KernelSpace):
    name = "toy"
    dims = ("N",)
    default_shape = (1024,)
    metric_unit = "GB/s"
    algorithms = (Tiled, Vector)

    def input_specs(self, shape):
        return {"x": BufferSpec(shape, self.dtype)}

    def outputs(self, shape):
        return {"y": BufferSpec(shape, self.dtype)}

    def reference(self, inputs, shape):
        return {"y": 2 * inputs["x"]}

    def work(self, shape):
        return 4.0 * shape[0]


def fake_time(config: dict) -> float:
    """Vector is faster; within an algorithm a deterministic pseudo-random spread."""
    base = 0.5 if config["ALGO"] == "vector" else 1.0
    return base + int(hashlib.sha256(config_key(config).encode()).hexdigest()[:6], 16) / 0xFFFFFF


def make_recording(dtype: str) -> RecordedMeasurements:
    space = ToyFamily(dtype=dtype)
    rec = RecordedMeasurements(kernel="tests.toy_family:ToyFamily", shape=(1024,), device=H200,
                               toolchain=Toolchain(nvcc="13.0"), template_hash="0" * 64, domains={})  # fmt: skip
    for config in valid_configs(space, (1024,), H200):
        t = fake_time(config)
        rec.add(config, Measurement(ok=True, timing=Timing(t, t, t, t, t, 5), registers=32))
    return rec
