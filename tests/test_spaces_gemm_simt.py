import random

import numpy as np
import pytest

from autotune.runtime.compiler import Compiler
from autotune.spaces import Launch, get_space
from autotune.spaces.enumeration import random_config, size
from autotune.spaces.gemm_simt import PIPELINES
from space_checks import sample_valid, template_defaults

SHAPE = (4096, 4096, 4096)


@pytest.fixture
def space():
    return get_space("gemm", {"ALGO": ["simt"]})


def test_default_config_is_the_templates_defaults(space):
    defaults = template_defaults("gemm_simt.cu")
    rendered = space.defines(space.default_config)
    assert space.default_config["ALGO"] == "simt"
    assert rendered == {k: defaults[k] for k in rendered}
    assert set(defaults) == set(rendered), "every tunable macro of the template is a parameter"


def test_default_config_is_valid(space, h200):
    assert space.violations(space.default_config, SHAPE, h200) == []


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"BM": 32, "WARPS_M": 4, "TM": 8}, "does not split"),
        ({"BM": 256, "BN": 256, "WARPS_M": 1, "WARPS_N": 1}, "accumulators"),
        ({"BM": 256, "BN": 256, "BK": 32, "PIPELINE": "cp.async-4", "WARPS_M": 4, "WARPS_N": 4}, "shared memory"),
        ({"MIN_BLOCKS": 2, "WARPS_M": 4, "WARPS_N": 4, "BM": 256, "BN": 128}, "cap registers"),
        ({"WARPS_M": 4, "WARPS_N": 4, "BM": 256, "BN": 256, "TM": 8, "TN": 8, "WNITER": 1}, "cap registers"),
        ({"BN": 32, "WARPS_N": 4, "TN": 8, "WNITER": 1}, "does not split"),
    ],
)
def test_constraints_explain_themselves(space, h200, change, reason):
    config = {**space.default_config, **change}
    problems = space.violations(config, SHAPE, h200)
    assert any(reason in p for p in problems), problems


def test_cp_async_needs_sm80(space, h200):
    import dataclasses

    volta = dataclasses.replace(h200, compute_capability=(7, 0))
    config = {**space.default_config, "PIPELINE": "cp.async-2"}
    assert any("cp.async" in p for p in space.violations(config, SHAPE, volta))
    assert space.violations(config, SHAPE, h200) == []


def test_domain_checks(space, h200):
    assert "not one of" in space.violations({**space.default_config, "BM": 96}, SHAPE, h200)[0]
    assert "missing parameter" in space.violations({"ALGO": "simt", "BM": 128}, SHAPE, h200)[0]
    assert "unknown parameters" in space.violations({**space.default_config, "X": 1}, SHAPE, h200)[0]


def test_most_of_the_space_is_valid(space, h200):
    """Rejected proposals cost sampler time: the parameterisation keeps them a minority of random draws."""
    rng = random.Random(0)
    draws = [random_config(space, rng) for _ in range(2000)]
    valid = sum(not space.violations(c, SHAPE, h200) for c in draws)
    assert valid / len(draws) > 0.35


def test_launch_geometry(space, h200):
    config = {**space.default_config, "BM": 64, "BN": 128, "WARPS_M": 1, "WARPS_N": 4, "BK": 16}
    (launch,) = space.launches(config, (1000, 300, 77), h200)
    assert isinstance(launch, Launch)
    assert launch.grid == (16 * 3, 1, 1)  # ceil(1000/64) * ceil(300/128)
    assert launch.block == (128, 1, 1)
    a_tile = 16 * (64 + 4)  # transposed A, padded
    assert launch.shared_bytes == 4 * 2 * (a_tile + 16 * 128)  # double buffered
    assert [a for a in launch.args if isinstance(a, str)] == ["A", "B", "C"]
    assert [int(a) for a in launch.args[3:]] == [1000, 300, 77]
    assert all(isinstance(a, np.int32) for a in launch.args[3:])


def test_validation_shapes_are_ragged_against_every_tile(space):
    sizes = {v for p in ("BM", "BN") for v in space.domain(p)}
    cases = [s for s, _ in space.validation_cases(SHAPE)]
    for m, n, k in cases:
        assert all(m % s and n % s for s in sizes), "ragged against every tile size"
    assert any(all(k % s for s in space.domain("BK")) for _, _, k in cases), "K ragged against every BK"
    assert any(n % 4 and k % 4 for _, n, k in cases), "an unaligned shape"
    assert any(n % 4 == 0 and k % 4 == 0 for _, n, k in cases), "an aligned one"


def test_narrowed_domains(space):
    narrow = get_space("gemm", {"ALGO": ["simt"], "BM": [64, 128]})
    assert narrow.domain("BM") == (64, 128)
    assert size(narrow) * 5 == size(space) * 2  # two of five tile heights
    with pytest.raises(ValueError, match="no parameter"):
        get_space("gemm", {"XX": [1]})
    with pytest.raises(ValueError, match="outside its domain"):
        get_space("gemm", {"BM": [96]})


@pytest.mark.nvcc
def test_sampled_valid_configs_compile(space, h200, cache_dir):
    """≥ 50 random valid configurations (every pipeline among them) compile for sm_90 without spilling much."""
    configs = sample_valid(space, h200, SHAPE, 50, seed=1)
    for pipeline in PIPELINES:  # make sure each pipeline variant is among them
        configs += sample_valid(get_space("gemm", {"ALGO": ["simt"], "PIPELINE": [pipeline]}), h200, SHAPE, 1, 2)
    compiler = Compiler("sm_90", cache_dir=cache_dir)
    try:
        futures = [compiler.submit(space.template_for(c), space.defines(c)) for c in configs]
        results = [f.result() for f in futures]
    finally:
        compiler.close()
    failed = [(c, r.error) for c, r in zip(configs, results) if not r.ok]
    assert not failed, failed[:3]
    assert all(r.registers > 0 and "sgemm" in r.kernels for r in results)


@pytest.mark.nvcc
def test_template_rejects_what_the_space_rejects(space, h200, cache_dir):
    """Configurations the constraints reject for their tile geometry also fail the template's static_asserts."""
    rng = random.Random(3)
    bad = []
    while len(bad) < 6:
        config = random_config(space, rng)
        problems = space.violations(config, SHAPE, h200)
        if problems and ("split" in problems[0] or "sub-tiles" in problems[0] or "lanes" in problems[0]):
            bad.append(config)
    compiler = Compiler("sm_90", cache_dir=cache_dir)
    try:
        results = [f.result() for f in [compiler.submit(space.template_for(c), space.defines(c)) for c in bad]]
    finally:
        compiler.close()
    assert all(not r.ok and "static assertion" in (r.error or "") for r in results), [r.error for r in results]


# --- split-K and small-M tiles ------------------------------------------------------------------------------
SMALL_M = {"BM": 16, "BN": 128, "WARPS_M": 1, "WARPS_N": 4, "TM": 4, "TN": 4, "WNITER": 1, "BK": 32}


def test_split_k_launches_into_a_workspace_then_reduces(space, h200):
    config = {**space.default_config, **SMALL_M, "SPLIT_K": 4}
    assert space.violations(config, (16, 4096, 4096), h200) == []
    gemm, reduce = space.launches(config, (16, 4096, 4096), h200)
    assert gemm.kernel == "sgemm" and gemm.grid == (32, 1, 4), "split-K is the grid's z dimension"
    assert gemm.args[:3] == ("A", "B", "partial"), "the partial tiles go to the workspace"
    assert reduce.kernel == "gemm_splitk_reduce" and reduce.args[:2] == ("partial", "C")
    assert int(reduce.args[2]) == 16 * 4096 and int(reduce.args[3]) == 4
    assert isinstance(reduce.args[2], np.int64) and isinstance(reduce.args[3], np.int32)
    (spec,) = space.workspace(config, (16, 4096, 4096)).values()
    assert spec.shape == (4, 16, 4096) and spec.dtype == "float32"


def test_without_split_k_one_launch_writes_c(space, h200):
    (launch,) = space.launches(space.default_config, (333, 264, 104), h200)
    assert launch.grid[2] == 1 and launch.args[2] == "C"
    assert space.workspace(space.default_config, (333, 264, 104)) == {}


def test_split_k_is_a_launch_choice_not_a_define(space):
    """Configurations that differ only in SPLIT_K share one compiled kernel."""
    split = {**space.default_config, "SPLIT_K": 8}
    assert "SPLIT_K" not in space.defines(split)
    assert space.defines(split) == space.defines(space.default_config)


def test_split_k_workspace_is_bounded(space, h200):
    config = {**space.default_config, "SPLIT_K": 16}
    assert any("workspace" in p for p in space.violations(config, (8192, 8192, 8192), h200))
    assert space.violations(config, (127, 4096, 4096), h200) == []


@pytest.mark.parametrize("bm, warps_m, tm, wniter", [(16, 1, 4, 1), (16, 2, 2, 1), (32, 1, 4, 2), (32, 2, 4, 1)])
def test_small_m_tiles_are_valid(space, h200, bm, warps_m, tm, wniter):
    config = {**space.default_config, "BM": bm, "WARPS_M": warps_m, "TM": tm, "WNITER": wniter, "BN": 128}
    assert space.violations(config, (16, 4096, 4096), h200) == []


def test_small_m_tiles_that_do_not_split_are_refused(space, h200):
    config = {**space.default_config, "BM": 16, "WARPS_M": 4, "TM": 8}
    assert any("does not split" in p for p in space.violations(config, SHAPE, h200))


@pytest.mark.nvcc
def test_small_m_and_split_k_configs_compile_without_spilling(space, h200, cache_dir):
    """BM 16 and 32 tiles compile and hold the reduce kernel, those the rule defaults use without spilling; the
    template's static_asserts agree with the constraints on a BM 16 tile that does not split."""
    from autotune.spaces._gemm_rules import SIMT_TILES

    configs = [{**space.default_config, **tile, "PIPELINE": p} for tile in SIMT_TILES.values()
               for p in ("double", "cp.async-3")]  # fmt: skip
    rules = len(configs)
    configs += sample_valid(get_space("gemm", {"ALGO": ["simt"], "BM": [16, 32]}), h200, SHAPE, 6, 4)
    bad = {**space.default_config, "BM": 16, "WARPS_M": 4, "TM": 8}
    compiler = Compiler("sm_90a", cache_dir=cache_dir)
    try:
        results = [f.result() for f in [compiler.submit(space.template_for(c), space.defines(c)) for c in configs]]
        rejected = compiler.submit(space.template_for(bad), space.defines(bad)).result()
    finally:
        compiler.close()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:2]
    assert all({"sgemm", "gemm_splitk_reduce"} <= set(r.kernels) for r in results)
    assert all(k.spill_stores == 0 for r in results[:rules] for k in r.kernels.values()), "the rules' tiles"
    assert not rejected.ok and "static assertion" in (rejected.error or "")
