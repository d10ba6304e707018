"""Helpers the GPU attention tests share: a default plus random valid configurations, and their evaluation by the
tuner's GPU worker (the family's validation cases, then the target shape)."""

from __future__ import annotations

import random
from typing import Any

from autotune.spaces import ALGO, config_key
from autotune.spaces.enumeration import random_config


def pick(space: Any, shape: tuple, device: Any, count: int, seed: int, algo: str | None = None) -> list[dict]:
    """The default (of ``algo``, else the space's) where valid, and random valid configurations (of ``algo`` only,
    where given) until there are more than ``count``."""
    rng = random.Random(seed)
    picked: dict[str, dict] = {}
    default = {ALGO: algo, **space.algos[algo].default_config} if algo else dict(space.default_config)
    if not space.violations(default, shape, device):
        picked[config_key(default)] = default
    for _ in range(5000):
        if len(picked) > count:
            break
        config = random_config(space, rng)
        if (algo is None or config[ALGO] == algo) and not space.violations(config, shape, device):
            picked[config_key(config)] = config
    return list(picked.values())


def evaluate(space: Any, shape: tuple, configs: list[dict], seed: int) -> list:
    """Each configuration through the tuner's GPU evaluator; every one correct, with registers and no spills."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    with GpuEvaluator(space, shape, seed=seed, min_time_ms=0.5, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
    assert all(m.registers and m.spill_bytes == 0 for m in results)
    return results
