"""GPU tier for the TF32 tensor-core kernels: ``gemm_tf32`` (1×TF32) is correct at its own tolerance for random
valid configurations on large and ragged shapes (its validation cases, wide-range inputs and K = 16384 included,
run before each target shape), and the fp32 contract refuses it: offered as an fp32 algorithm, it fails
validation against the SIMT kernel's error. (``tf32x3`` is covered by tests/test_gpu_gemm.py, generic over the
algorithms of ``gemm``.)"""

from __future__ import annotations

import random

import pytest

from autotune.spaces import ALGO, config_key, get_space
from autotune.spaces.enumeration import random_config
from autotune.spaces.gemm import GemmSpace
from autotune.spaces.gemm_simt import SimtGemm
from autotune.spaces.gemm_tf32x3 import Tf32Gemm

pytestmark = pytest.mark.gpu

SHAPES = [(1000, 1000, 1000), (127, 4096, 4096), (33, 65, 17), (1, 4096, 4096)]


class Tf32PosingAsFp32(GemmSpace):
    """1×TF32 offered as an algorithm of fp32 gemm: what the accuracy contract must refuse."""

    algorithms = (SimtGemm, Tf32Gemm)


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def pick(device, count: int, seed: int) -> list[dict]:
    space = get_space("gemm_tf32")
    rng = random.Random(seed)
    picked = {config_key(space.default_config): space.default_config}
    while len(picked) <= count:
        config = random_config(space, rng)
        if not space.violations(config, (4096, 4096, 4096), device):
            picked[config_key(config)] = config
    return list(picked.values())


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_valid_configs_are_correct_at_tf32_tolerance(shape, device):
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space("gemm_tf32")
    configs = [c for c in pick(device, 8, 2026) if not space.violations(c, shape, device)]
    with GpuEvaluator(space, shape, seed=7, min_time_ms=1.0, max_reps=5) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
    assert all(m.timing.median > 0 and m.registers for m in results)


def test_fp32_contract_refuses_1xtf32(device):
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = Tf32PosingAsFp32()
    tf32 = {ALGO: "tf32", **space.algos["tf32"].default_config}
    tf32x3 = {ALGO: "tf32x3", **get_space("gemm").algos["tf32x3"].default_config}
    assert space.baseline_config()[ALGO] == "simt"
    with GpuEvaluator(space, (512, 512, 512), seed=3, min_time_ms=1.0, max_reps=3) as evaluator:
        measured = evaluator.submit(tf32).result()
    assert not measured.ok and measured.failure == "wrong", (measured.failure, measured.reason)
    # the compensated kernel, on the same inputs under the same contract, passes
    with GpuEvaluator(get_space("gemm"), (512, 512, 512), seed=3, min_time_ms=1.0, max_reps=3) as evaluator:
        measured = evaluator.submit(tf32x3).result()
    assert measured.ok, (measured.failure, measured.reason)
