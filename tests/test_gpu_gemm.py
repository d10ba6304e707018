"""GPU tier: the SGEMM template is correct for random valid configurations at large and ragged shapes."""

from __future__ import annotations

import random

import pytest

from autotune.spaces import config_key, get_space
from autotune.spaces.gemm_simt import PIPELINES

pytestmark = pytest.mark.gpu

SHAPES = [(4096, 4096, 4096), (1000, 1000, 1000), (127, 4096, 4096), (33, 65, 17)]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


@pytest.fixture(scope="module")
def configs(device):
    """30 random valid configurations, plus the default and one of each pipeline."""
    space = get_space("gemm", {"ALGO": ["simt"]})
    rng = random.Random(2026)
    picked = {config_key(space.default_config): dict(space.default_config)}
    wanted_pipelines = set(PIPELINES)
    while len(picked) < 31 or wanted_pipelines:
        config = space.random_config(rng)
        if space.violations(config, (4096, 4096, 4096), device):
            continue
        if len(picked) >= 31 and config["PIPELINE"] not in wanted_pipelines:
            continue
        wanted_pipelines.discard(config["PIPELINE"])
        picked[config_key(config)] = config
    return list(picked.values())


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_valid_configs_are_correct(shape, configs):
    from autotune.evaluation.gpu import GpuEvaluator

    space = get_space("gemm")
    with GpuEvaluator(space, shape, seed=7, min_time_ms=1.0, max_reps=5) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
    # fp32 with fp32 accumulation: far below the 1e-4 threshold; TF32 or a lost K tile would be far above.
    assert max(m.max_rel_error for m in results) < 2e-6
    assert all(m.timing.median > 0 and m.timing.reps >= 5 for m in results)
    assert all(m.registers and m.registers > 0 for m in results)
