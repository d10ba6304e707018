"""The stream-K schedule of the Hopper GEMM as its own algorithm: its launch plan (flags zeroed first, one block per
SM whatever the tile count, a partial slot per block), its defines, and the layout families that reach it."""

from __future__ import annotations

import shutil

import pytest

from autotune.spaces import ALGO, get_space
from autotune.spaces.base import Launch, Zero
from autotune.spaces.gemm_wgmma_tma_streamk import STREAM_K_BLOCKS

from space_checks import compile_all, sample_valid

ALGORITHM = "wgmma_tma_streamk"
WEIGHT_GRADIENT = (768, 768, 8192)  # 36 tiles of 128×128 on 132 SMs


@pytest.fixture(params=["float16", "bfloat16"])
def space(request):
    return get_space("gemm", {ALGO: [ALGORITHM]}, dtype=request.param)


def default(space, **change):
    return {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config, **change}


def test_offered_for_half_types_on_hopper_only(h200):
    assert ALGORITHM not in get_space("gemm", dtype="float32").domain(ALGO)
    space = get_space("gemm", dtype="bfloat16")
    assert ALGORITHM in space.domain(ALGO)
    assert space.algos[ALGORITHM].unfit((768, 768, 8190), h200) is not None, "TMA rows: K a multiple of 8"


def test_no_split_k_and_no_clusters_so_every_draw_can_be_valid(space, h200):
    import random

    from autotune.spaces.enumeration import random_config

    assert {"SPLIT_K", "CLUSTER_M"}.isdisjoint(space.algos[ALGORITHM].default_config)
    rng = random.Random(3)
    draws = [random_config(space, rng) for _ in range(1000)]
    assert sum(not space.violations(c, WEIGHT_GRADIENT, h200) for c in draws) / len(draws) > 0.25


def test_flags_zeroed_then_one_block_per_sm_with_a_slot_each(space, h200):
    config = default(space)
    assert space.violations(config, WEIGHT_GRADIENT, h200) == []
    assert space.defines(config)["STREAM_K"] == 1 and "CLUSTER_M" not in space.defines(config)
    zero, launch = space.launches(config, WEIGHT_GRADIENT, h200)
    assert zero == Zero("sk_flags") and isinstance(launch, Launch) and launch.kernel == "gemm_wgmma_tma"
    assert launch.grid == (h200.multiprocessors, 1, 1), "36 tiles, yet every SM takes a share of their k-tiles"
    assert launch.args[2] == "C" and launch.args[-2:] == ("sk_partial", "sk_flags")
    workspace = space.workspace(config, WEIGHT_GRADIENT)
    assert workspace["sk_partial"].shape == (STREAM_K_BLOCKS, 128 * 128) and workspace["sk_flags"].dtype == "int32"
    assert STREAM_K_BLOCKS >= h200.multiprocessors
    assert space.describe(config).startswith("wgmma+tma stream-k 128x128x64 wg2 pingpong s6")
    few = space.launches(config, (64, 64, 64), h200)[1]
    assert few.grid == (h200.multiprocessors, 1, 1), "one k-tile of one tile: one block works, the rest return"


@pytest.mark.parametrize("family, bias", [("gemm_tn", False), ("gemm_nt", False), ("linear", True)])
def test_the_layout_families_run_it_natively(h200, family, bias):
    """gemm_tn reads A stored K×M itself, gemm_nt and linear B stored N×K, and linear adds its bias in the
    finishing piece's epilogue: the same plan with their maps (and bias), the flags still zeroed first."""
    space = get_space(family, dtype="bfloat16")
    config = default(space)
    shape = (768, 3072, 8192)
    assert space.violations(config, shape, h200) == []
    zero, launch = space.launches(config, shape, h200)
    assert zero == Zero("sk_flags") and launch.args[-2:] == ("sk_partial", "sk_flags")
    assert ("bias" in launch.args) is bias and set(space.workspace(config, shape)) == {"sk_partial", "sk_flags"}
    defines = space.defines(config)
    assert defines["STREAM_K"] == 1 and ("B_K_MAJOR" in defines) is (family != "gemm_tn")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_sampled_valid_configs_compile_without_spills(space, h200, cache_dir):
    configs = [default(space), *sample_valid(space, h200, WEIGHT_GRADIENT, 3, seed=11)]
    for result in compile_all(space, configs, cache_dir):
        assert result.spill_bytes == 0, result
