"""GPU tier: gemm_nt, gemm_tn and linear are correct for every algorithm and dtype, at aligned, ragged and vector
shapes (the family's validation cases run before each target: wide-range inputs and K = 16384 included), and the
TMA algorithm's native layouts under each schedule, a cluster, split-K and the bias epilogue."""

from __future__ import annotations

import random

import pytest

from autotune.spaces import ALGO, config_key, get_space
from autotune.spaces.enumeration import random_config

pytestmark = pytest.mark.gpu

FAMILIES = ("gemm_nt", "gemm_tn", "linear")
SHAPES = [(1000, 264, 1032), (333, 131, 104), (67, 131, 33)]
VECTORS = [(1, 3072, 768), (4096, 1, 768), (1, 1, 77)]
PER_ALGORITHM = 3
CASES = [(f, d, a) for f in FAMILIES for d in get_space(f).supported_dtypes()
         for a in get_space(f, dtype=d).domain(ALGO) if a != "gemv"]  # fmt: skip


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def evaluate(space, shape, configs):
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    with GpuEvaluator(space, shape, seed=7, min_time_ms=0.5, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    return [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]


def pick(space, algo: str, shape, device, count: int, seed: int) -> list[dict]:
    rng, picked = random.Random(seed), {}
    default = {ALGO: algo, **space.algos[algo].default_config}
    if not space.violations(default, shape, device):
        picked[config_key(default)] = default
    narrowed = get_space(space.name, {ALGO: [algo]}, dtype=space.dtype)
    for _ in range(20000):
        if len(picked) > count:
            break
        config = random_config(narrowed, rng)
        if not space.violations(config, shape, device):
            picked[config_key(config)] = config
    return list(picked.values())


@pytest.mark.parametrize("family, dtype, algo", CASES, ids=[f"{f}-{d}-{a}" for f, d, a in CASES])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_valid_configs_are_correct(family, dtype, algo, shape, device):
    space = get_space(family, dtype=dtype)
    configs = pick(space, algo, shape, device, PER_ALGORITHM, 2026)
    if not configs:
        pytest.skip(f"no configuration of {algo} fits {shape}")
    assert not evaluate(space, shape, configs)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", VECTORS, ids=lambda s: "x".join(map(str, s)))
def test_vectors_and_rule_defaults_are_correct(family, dtype, shape, device):
    """A row or a column (gemv, swapped where the layout asks), and the dispatcher's rule default there."""
    space = get_space(family, dtype=dtype)
    configs = [space.rule_default(shape, device), *pick(space, "gemv", shape, device, 2, 7)]
    assert not evaluate(space, shape, configs)


STREAM_K = {ALGO: "wgmma_tma_streamk"}  # its own default configuration, and the changes below
TMA_VARIANTS = [
    {},
    {"PINGPONG": 1, "BM": 128, "BN": 128},
    {"WG": 1, "BM": 64, "BN": 192, "STAGES": 6},
    {"CLUSTER_M": 2, "BN": 128},
    {"SPLIT_K": 3, "BN": 128},
    {"BM": 256, "BN": 128, "STAGES": 3},
    {"PINGPONG": 1, "BN": 192, "STAGES": 5},  # 192 accumulators per consumer (not with linear's bias)
    STREAM_K,  # the stream-K schedule (its own algorithm): pieces of a tile meet in the kernel
    {**STREAM_K, "PINGPONG": 0, "BN": 256, "STAGES": 4},
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tma_native_layouts_in_every_schedule(family, dtype, device):
    space = get_space(family, dtype=dtype)
    ragged = (1000, 264, 333) if family == "gemm_tn" else (999, 131, 64)  # what each layout's TMA rows allow
    shapes = [(1000, 264, 1032), (2048, 768, 3072), ragged]
    for shape in shapes:
        variants = ({ALGO: v.get(ALGO, "wgmma_tma"), **space.algos[v.get(ALGO, "wgmma_tma")].default_config, **v}
                    for v in TMA_VARIANTS)  # fmt: skip
        configs = [c for c in variants if not space.violations(c, shape, device)]
        assert len(configs) >= 4, shape
        assert not evaluate(space, shape, configs), shape
