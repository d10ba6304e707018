"""GPU tier: linear_gelu (C = gelu_tanh(A·Bᵀ + bias) and ``pre``, the sum before GELU) is correct for every
algorithm and dtype at aligned, ragged and vector shapes (the family's validation cases first: wide-range inputs and
K = 16384 included), and the TMA kernel's GELU epilogue under each schedule, a cluster, split-K (gemm_bias_gelu
after the reduce) and stream-K."""

from __future__ import annotations

import pytest

from autotune.spaces import ALGO, get_space

from test_gpu_gemm_layouts import SHAPES, TMA_VARIANTS, VECTORS, evaluate, pick

pytestmark = pytest.mark.gpu

CASES = [(d, a) for d in get_space("linear_gelu").supported_dtypes()
         for a in get_space("linear_gelu", dtype=d).domain(ALGO) if a != "gemv"]  # fmt: skip


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


@pytest.mark.parametrize("dtype, algo", CASES, ids=[f"{d}-{a}" for d, a in CASES])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_valid_configs_are_correct(dtype, algo, shape, device):
    space = get_space("linear_gelu", dtype=dtype)
    configs = pick(space, algo, shape, device, 2, 2029)
    if not configs:
        pytest.skip(f"no configuration of {algo} fits {shape}")
    assert not evaluate(space, shape, configs)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [*VECTORS, (8192, 3072, 768), (1000, 1000, 1001)],
                         ids=lambda s: "x".join(map(str, s)))
def test_rule_defaults_are_correct(dtype, shape, device):
    space = get_space("linear_gelu", dtype=dtype)
    assert not evaluate(space, shape, [space.rule_default(shape, device)])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_gelu_epilogue_in_every_schedule(dtype, device):
    space = get_space("linear_gelu", dtype=dtype)
    for shape in [(1000, 264, 1032), (2048, 768, 3072), (999, 131, 64)]:
        variants = ({ALGO: v.get(ALGO, "wgmma_tma"), **space.algos[v.get(ALGO, "wgmma_tma")].default_config, **v}
                    for v in TMA_VARIANTS)  # fmt: skip
        configs = [c for c in variants if not space.violations(c, shape, device)]
        assert len(configs) >= 4, shape
        assert not evaluate(space, shape, configs), shape
