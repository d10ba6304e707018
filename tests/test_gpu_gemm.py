"""GPU tier: every GEMM algorithm, at every dtype it answers, is correct for random valid configurations at large
and ragged shapes (odd M, N, K; K no multiple of any mma K; unaligned rows), wide-range inputs and K = 16384
included (the family's validation cases run before each target shape)."""

from __future__ import annotations

import random

import pytest

from autotune.spaces import ALGO, config_key, get_space
from autotune.spaces.gemm_simt import PIPELINES

pytestmark = pytest.mark.gpu

SHAPES = [(1000, 1000, 1000), (127, 4096, 4096), (33, 65, 17), (1, 4096, 4096), (1001, 1, 4099)]
PER_ALGORITHM = 10  # random valid configurations per (dtype, algorithm), besides its default
CASES = [(d, a) for d in get_space("gemm").supported_dtypes() for a in get_space("gemm", dtype=d).domain(ALGO)]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def pick(dtype: str, algo: str, device, count: int, seed: int, shape=(4096, 4096, 4096)) -> list[dict]:
    """The algorithm's default (where valid) and ``count`` random valid configurations of it at ``shape``."""
    space = get_space("gemm", {ALGO: [algo]}, dtype=dtype)
    rng = random.Random(seed)
    picked: dict[str, dict] = {}
    default = {ALGO: algo, **space.algos[algo].default_config}
    if not space.violations(default, shape, device):
        picked[config_key(default)] = default
    wanted_pipelines = set(PIPELINES) if algo == "simt" else set()
    for _ in range(20000):
        if len(picked) > count and not wanted_pipelines:
            break
        config = space.random_config(rng)
        if space.violations(config, shape, device):
            continue
        if len(picked) > count and config.get("PIPELINE") not in wanted_pipelines:
            continue
        wanted_pipelines.discard(config.get("PIPELINE"))
        picked[config_key(config)] = config
    return list(picked.values())


@pytest.mark.parametrize("dtype, algo", CASES, ids=[f"{d}-{a}" for d, a in CASES])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_valid_configs_are_correct(shape, dtype, algo, device):
    from autotune.evaluation.gpu import GpuEvaluator

    space = get_space("gemm", dtype=dtype)
    configs = pick(dtype, algo, device, PER_ALGORITHM, 2026, shape)
    if not configs:
        pytest.skip(f"no configuration of {algo} fits {shape}")
    with GpuEvaluator(space, shape, seed=7, min_time_ms=1.0, max_reps=5) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
    assert all(m.timing.median > 0 and m.timing.reps >= 5 for m in results)
    assert all(m.registers and m.registers > 0 for m in results)
