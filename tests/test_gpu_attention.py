"""GPU tier: every attention algorithm, at every dtype it answers, head_dim 64 and 128, causal and not, is correct
for its default and random valid configurations. Each evaluation first checks the family's validation cases
(lengths 1, 77, 1000, 1031, 4097; seq_q ≠ seq_kv; large logits) against float64, then the target shape."""

from __future__ import annotations

import random

import pytest

from autotune.spaces import ALGO, config_key, get_space

pytestmark = pytest.mark.gpu

PER_ALGORITHM = 4  # random valid configurations per case, besides the default
KERNELS = ("attention", "attention_causal")
CASES = [
    (kernel, dtype, algo, d)
    for kernel in KERNELS
    for dtype in ("float16", "bfloat16", "float32")
    for algo in get_space(kernel, dtype=dtype).domain(ALGO)
    for d in (64, 128)
]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def pick(space, algo: str, shape, device, count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    picked: dict[str, dict] = {}
    default = {ALGO: algo, **space.algos[algo].default_config}
    if not space.violations(default, shape, device):
        picked[config_key(default)] = default
    for _ in range(5000):
        if len(picked) > count:
            break
        config = space.random_config(rng)
        if config[ALGO] == algo and not space.violations(config, shape, device):
            picked[config_key(config)] = config
    return list(picked.values())


@pytest.mark.parametrize("kernel, dtype, algo, d", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_random_valid_configs_are_correct(kernel, dtype, algo, d, device):
    from autotune.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, dtype=dtype)
    shape = (2, 3, 333, 1000, d)
    configs = pick(space, algo, shape, device, PER_ALGORITHM, seed=d)
    with GpuEvaluator(space, shape, seed=11, min_time_ms=0.5, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
    assert all(m.registers and m.spill_bytes == 0 for m in results)
