"""The few-row Hopper GEMM (`wgmma_skinny`): offered where it computes (half precision, sm_90a, TMA-strided rows;
gemm, and gemm_nt, linear and linear_gelu reading B as stored), its launch plan (tiles of C by A's row tiles by the
K slices of a cluster, no workspace), its defines, the rule that picks it for 2 to 32 rows, and its configurations
compiling without spills."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from autotune.spaces import ALGO, get_space
from autotune.spaces.base import Launch, TensorMap

from space_checks import assert_offered_on_compute_capability_9_0_only, compile_all, sample_valid, template_defaults

ALGORITHM = "wgmma_skinny"
DECODE = (16, 4096, 4096)  # a decoding step's projection at 16 rows


def default(space, **change):
    return {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config, **change}


def test_the_template_defaults_are_the_default_configuration():
    space = get_space("gemm", dtype="bfloat16")
    defaults = template_defaults("gemm_wgmma_skinny.cu")
    assert {k: defaults[k] for k in space.algos[ALGORITHM].default_config} == space.algos[ALGORITHM].default_config


def test_offered_for_half_types_on_hopper_only(h200):
    assert ALGORITHM not in get_space("gemm", dtype="float32").domain(ALGO)
    space = get_space("gemm", dtype="bfloat16")
    assert_offered_on_compute_capability_9_0_only(space, ALGORITHM, default(space), DECODE, h200)
    assert "multiples of 8" in space.algos[ALGORITHM].unfit((16, 4100, 4090), h200)
    assert "at most 256" in space.algos[ALGORITHM].unfit((257, 4096, 4096), h200), "many rows: the TMA tiles'"
    assert space.algos[ALGORITHM].unfit((256, 4096, 4096), h200) is None
    assert "N and K" in space.algos[ALGORITHM].unfit((16, 4090, 4096), h200), "B stored K×N: rows of N too"
    assert get_space("gemm_nt", dtype="bfloat16").algos[ALGORITHM].unfit((16, 4090, 4096), h200) is None


def test_not_offered_where_the_template_does_not_compute(h200):
    space = get_space("gemm_tn", dtype="bfloat16")
    assert "A stored transposed" in space.algos[ALGORITHM].unfit(DECODE, h200)
    assert space.violations(default(space), DECODE, h200)
    assert space.rule_default(DECODE, h200)[ALGO] != ALGORITHM


def test_one_launch_over_tiles_row_tiles_and_k_slices_without_workspace(h200):
    space = get_space("gemm", dtype="bfloat16")
    config = default(space, SPLIT_K=8, BM=8)
    shape = (20, 1000, 4096)
    assert space.violations(config, shape, h200) == []
    (launch,) = space.launches(config, shape, h200)
    assert isinstance(launch, Launch) and launch.kernel == "gemm_wgmma_skinny"
    assert launch.grid == (8, 3, 8) and launch.block == (160, 1, 1)
    weight, rows, *rest = launch.args
    assert tuple(rest) == ("C", 20, 1000, 4096) and isinstance(rest[1], np.int32)
    assert weight == TensorMap("B", "bfloat16", dims=(1000, 4096), box=(64, 64)), "B stored K×N: 64-column panels"
    assert rows == TensorMap("A", "bfloat16", dims=(4096, 20), box=(64, 8))
    assert space.workspace(config, shape) == {}
    assert launch.shared_bytes == 6 * (128 + 8) * 128 + 1024 + 16 * 6
    defines = space.defines(config)
    assert defines["SPLIT_K"] == 8 and "B_K_MAJOR" not in defines and "GEMM_BIAS" not in defines
    assert space.describe(config) == "wgmma skinny 8x128x64 wg1 s6 splitk8"


@pytest.mark.parametrize("family, epilogue", [("gemm_nt", ()), ("linear", ("bias",)), ("linear_gelu", ("bias", "pre"))])
def test_the_layout_families_read_b_as_stored(family, epilogue, h200):
    space = get_space(family, dtype="float16")
    config = default(space, BN=256, WG=2, STAGES=4)
    (launch,) = space.launches(config, DECODE, h200)
    assert launch.args[0] == TensorMap("B", "float16", dims=(4096, 4096), box=(64, 256)), "N×K: one K-major box"
    assert launch.args[2:3 + len(epilogue)] == ("C", *epilogue), "the epilogue's buffers after C"
    defines = space.defines(config)
    assert defines["B_K_MAJOR"] == 1 and ("GEMM_BIAS" in defines) is bool(epilogue)
    assert ("GEMM_GELU" in defines) is ("pre" in epilogue)


def test_constraints_name_the_problem(h200):
    space = get_space("gemm", dtype="bfloat16")
    assert any("m64 slices" in p for p in space.violations(default(space, BN=64, WG=2), DECODE, h200))
    assert any("k-tiles" in p for p in space.violations(default(space, SPLIT_K=8), (16, 4096, 256), h200))
    assert any("shared memory" in p for p in space.violations(default(space, BN=256, WG=2, STAGES=8, BM=64),
                                                              DECODE, h200))  # fmt: skip
    assert not space.violations(default(space, BM=128, BN=128, WG=1), (127, 4096, 4096), h200), "128 accumulators"
    swiglu = get_space("linear_swiglu", dtype="bfloat16")
    too_many = swiglu.violations(default(swiglu, BM=128, BN=128, WG=1), (127, 4096, 4096), h200)
    assert any("256 accumulators per thread, at most 128" in p for p in too_many), "gate and up: twice the tile"
    assert not swiglu.violations(default(swiglu, BM=128, BN=128, WG=2, STAGES=3), (127, 4096, 4096), h200)


@pytest.mark.parametrize("family", ["gemm", "gemm_nt", "linear", "linear_gelu"])
def test_the_rule_takes_it_from_2_to_128_rows_and_splits_k_to_cover_the_sms(family, h200):
    space = get_space(family, dtype="bfloat16")
    for m, bm in ((2, 8), (16, 16), (17, 32), (32, 32), (33, 64), (64, 64), (65, 128), (127, 128), (128, 128)):
        config = space.rule_default((m, 4096, 4096), h200)
        assert config[ALGO] == ALGORITHM and config["BM"] == bm, (m, config)
        assert config["BN"] == 64 and config["SPLIT_K"] == 2, "64 tiles of 64 columns, two slices: one per SM"
        assert config["STAGES"] == 8 and not space.violations(config, (m, 4096, 4096), h200)
    wide = space.rule_default((16, 28672, 4096), h200)
    assert wide[ALGO] == ALGORITHM and wide["SPLIT_K"] == 1, "448 tiles fill the SMs unsplit"
    ring = wide["STAGES"] * (64 + 16) * 128
    assert 2 * (ring + 2048) <= h200.smem_per_multiprocessor, "two blocks per SM: a ring that fits twice"
    swiglu = get_space("linear_swiglu", dtype="bfloat16").rule_default((16, 14336, 4096), h200)
    assert (swiglu[ALGO], swiglu["BN"], swiglu["SPLIT_K"], swiglu["STAGES"]) == (ALGORITHM, 64, 1, 6)
    tall = space.rule_default((128, 28672, 4096), h200)
    assert (tall["BM"], tall["BN"], tall["SPLIT_K"]) == (128, 128, 1), "past three waves of 64 columns: 128"
    assert space.rule_default((128, 14336, 4096), h200)["BN"] == 64
    assert space.rule_default((129, 4096, 4096), h200)[ALGO] != ALGORITHM
    assert space.rule_default((16, 4096, 4090), h200)[ALGO] != ALGORITHM, "K not a multiple of 8: no TMA"
    one = space.rule_default((1, 4096, 4096), h200)
    if family == "gemm":  # B stored K×N: 8-row tiles in two slices, not gemv across B's rows
        assert (one[ALGO], one["BM"], one["BN"], one["SPLIT_K"]) == (ALGORITHM, 8, 64, 2)
    else:
        assert one[ALGO] == "gemv"
    assert get_space("linear_swiglu", dtype="bfloat16").rule_default((64, 14336, 4096), h200)[ALGO] != ALGORITHM


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("family", ["gemm", "linear", "linear_gelu"])
def test_sampled_valid_configs_compile_without_spills(family, h200, cache_dir):
    space = get_space(family, {ALGO: [ALGORITHM]}, dtype="bfloat16")
    configs = [default(space), *sample_valid(space, h200, DECODE, 3, seed=5),
               default(space, BM=128, BN=128, WG=1, STAGES=4)]  # 128 accumulators per thread, the most it takes
    results = compile_all(space, configs, cache_dir)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:1]
    assert not any(r.spill_bytes for r in results)
