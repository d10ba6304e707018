"""GPU tier: the few-row Hopper GEMM (`wgmma_skinny`) is correct in gemm, gemm_nt, linear and linear_gelu (pre and
GELU stored from the sum) for random configurations, every row tile, both consumer counts and every K split
(clusters of 1 to 8 blocks summing in distributed shared memory), on ragged shapes (M, N, K past the tiles, empty K
slices) and the rule defaults at decoding's shapes; the family's validation cases (ragged, wide-range, K = 16384)
run first."""

from __future__ import annotations

import pytest

from autotune.spaces import ALGO, get_space

from test_gpu_gemm_layouts import evaluate, pick

pytestmark = pytest.mark.gpu

ALGORITHM = "wgmma_skinny"
FAMILIES = [("gemm", "bfloat16"), ("gemm_nt", "float16"), ("linear", "bfloat16"), ("linear_gelu", "float16")]
SHAPES = [(16, 4096, 4096), (5, 1000, 4104), (27, 264, 520)]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


@pytest.mark.parametrize("family, dtype", FAMILIES, ids=[f"{f}-{d}" for f, d in FAMILIES])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_configs_and_the_rule_default_are_correct(family, dtype, shape, device):
    space = get_space(family, dtype=dtype)
    configs = pick(space, ALGORITHM, shape, device, 3, 2029)
    rule = space.rule_default(shape, device)
    assert rule[ALGO] == ALGORITHM, rule
    assert not evaluate(space, shape, configs + [rule])


@pytest.mark.parametrize("family, dtype", FAMILIES, ids=[f"{f}-{d}" for f, d in FAMILIES])
def test_every_row_tile_consumer_count_and_split(family, dtype, device):
    space = get_space(family, dtype=dtype)
    base = {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config}
    variants = [{"BM": bm, "SPLIT_K": s} for bm in (8, 16, 32, 64, 128) for s in (1, 3, 8)]
    variants += [{"BN": 256, "WG": 2, "STAGES": 4}, {"BN": 64, "STAGES": 2, "SPLIT_K": 6},
                 {"BN": 128, "WG": 2, "SPLIT_K": 2}, {"BN": 256, "WG": 2, "STAGES": 3, "SPLIT_K": 8}]
    shape = (40, 520, 1160)  # 19 k-tiles: a split of 8 leaves its last slice short, 3 rows past a 32-row tile
    configs = [c for c in ({**base, **v} for v in variants) if not space.violations(c, shape, device)]
    assert len(configs) == len(variants)
    assert not evaluate(space, shape, configs)


def test_more_slices_than_k_tiles_leave_some_empty_and_stay_exact(device):
    space = get_space("gemm_nt", dtype="bfloat16")
    config = {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config, "SPLIT_K": 8}
    shape = (16, 264, 456)  # 8 k-tiles of 64, the last partial: each slice one k-tile
    assert not space.violations(config, shape, device)
    assert not evaluate(space, shape, [config, {**config, "SPLIT_K": 6}])


@pytest.mark.parametrize("family, dtype", FAMILIES + [("linear_swiglu", "bfloat16")],
                         ids=[f"{f}-{d}" for f, d in FAMILIES + [("linear_swiglu", "bfloat16")]])  # fmt: skip
def test_128_row_tiles(family, dtype, device):
    """BM 128 (wgmma's n128: 128 accumulators per thread at most, SwiGLU's two planes on two consumers) over 200
    rows: two row tiles, the second ragged, each streaming the weight again."""
    space = get_space(family, dtype=dtype)
    base = {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config, "BM": 128}
    variants = [{"BN": 128, "WG": 2, "STAGES": 3, "SPLIT_K": 1}, {"BN": 64, "WG": 1, "STAGES": 3, "SPLIT_K": 3},
                {"BN": 128, "WG": 1, "STAGES": 4, "SPLIT_K": 2}, {"BN": 256, "WG": 2, "STAGES": 2, "SPLIT_K": 8}]
    shape = (200, 264, 1160)
    configs = [c for c in ({**base, **v} for v in variants) if not space.violations(c, shape, device)]
    assert len(configs) == (2 if family == "linear_swiglu" else 4), "SwiGLU: one m64 slice per consumer"
    assert not evaluate(space, shape, configs)
