"""The FP32-accurate 3xTF32 wgmma GEMM's space (autotune/spaces/gemm_wgmma_tf32x3.py) on the CPU: offered for
float32 only, the split pre-pass and tensor maps of its launch plan, its workspaces, sm_90a compiles."""

import shutil
import subprocess

import numpy as np
import pytest

from autotune.spaces import ALGO, get_space
from autotune.spaces.base import TensorMap
from space_checks import compile_all, sample_valid, template_defaults

SHAPE = (4096, 4096, 4096)
ALGORITHM = "wgmma_tf32x3"


@pytest.fixture
def space():
    return get_space("gemm", {ALGO: [ALGORITHM]}, dtype="float32")


def default(space, **change):
    return {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config, **change}


def test_offered_for_float32_only():
    assert ALGORITHM in get_space("gemm", dtype="float32").domain(ALGO)
    for dtype in ("float16", "bfloat16"):
        assert ALGORITHM not in get_space("gemm", dtype=dtype).domain(ALGO)


def test_defines_are_the_shared_template_at_dtype_0(space, h200):
    defines = space.defines(default(space, SPLIT_K=4))
    assert defines["DTYPE"] == 0 and defines["FOLD"] == 2 and "SPLIT_K" not in defines
    assert str(space.template_for(default(space))).endswith("gemm_wgmma_tf32x3.cu")
    defaults = template_defaults("gemm_wgmma_tf32x3.cu")
    config = space.algos[ALGORITHM].default_config
    keys = ("BM", "BN", "WG", "STAGES", "FOLD")
    assert {k: defaults[k] for k in keys} == {k: config[k] for k in keys}
    assert space.violations(default(space), SHAPE, h200) == []


def test_any_shape_fits_k_padded_in_the_workspaces(space, h200):
    algo = space.algos[ALGORITHM]
    assert algo.unfit((4093, 4097, 4099), h200) is None, "M, N free; K padded to whole 16-byte rows"
    split_a, split_b, main = space.launches(default(space), (33, 65, 17), h200)
    assert [int(x) for x in split_a.args[3:]] == [33, 17, 0, 20] and split_a.grid == (1, 2, 1)
    assert [int(x) for x in split_b.args[3:]] == [17, 65, 1, 20] and split_b.grid == (3, 1, 1)
    assert main.args[0].dims == (20, 33) and main.args[1].dims == (20, 65) and int(main.args[-1]) == 17
    assert all(m.problems() == [] for m in main.args[:4])
    assert space.workspace(default(space), (33, 65, 17))["b_small"].shape == (65, 20)


def test_launch_plan_splits_then_multiplies(space, h200):
    split_a, split_b, main = space.launches(default(space), (1000, 1001, 1004), h200)
    assert split_a.kernel == split_b.kernel == "gemm_tf32_split"
    assert split_a.args[:3] == ("A", "a_big", "a_small") and [int(x) for x in split_a.args[3:]] == [1000, 1004, 0, 1004]
    assert split_b.args[:3] == ("B", "b_big", "b_small") and [int(x) for x in split_b.args[3:]] == [1004, 1001, 1, 1004]
    assert split_b.grid == (32, 32, 1)
    assert main.kernel == "gemm_wgmma_tma" and main.block == (256, 1, 1), "a producer and one consumer"
    a, b, a_small, b_small, c, *dims = main.args
    assert a == TensorMap("a_big", "float32", dims=(1004, 1000), box=(32, 64))
    assert b == TensorMap("b_big", "float32", dims=(1004, 1001), box=(32, 128)), "B transposed: N rows of K"
    assert a_small.buffer == "a_small" and b_small.buffer == "b_small"
    assert all(m.problems() == [] for m in (a, b, a_small, b_small))
    assert c == "C" and [int(d) for d in dims] == [1000, 1001, 1004] and all(isinstance(d, np.int32) for d in dims)
    assert main.shared_bytes == 4 * 2 * (64 + 128) * 32 * 4 + 1024 + 16 * 4 + 16
    work = space.workspace(default(space), (1000, 1001, 1004))
    assert {k: v.shape for k, v in work.items()} == {"a_big": (1000, 1004), "a_small": (1000, 1004),
                                                      "b_big": (1001, 1004), "b_small": (1001, 1004)}  # fmt: skip
    *_, main, reduce = space.launches(default(space, SPLIT_K=4), (256, 256, 65536), h200)
    assert main.args[4] == "partial" and reduce.kernel == "gemm_splitk_reduce"
    assert space.workspace(default(space, SPLIT_K=4), (256, 256, 65536))["partial"].shape == (4, 256, 256)


@pytest.mark.parametrize(
    "change, reason",
    [({"BN": 256, "BM": 128}, "accumulators"), ({"BM": 128, "BN": 128, "STAGES": 4}, "shared memory"),
     ({"PINGPONG": 1, "WG": 1}, "ping-pong")],  # fmt: skip
)
def test_constraints_count_both_accumulator_sets_and_four_operand_tiles(space, h200, change, reason):
    problems = space.violations(default(space, **change), SHAPE, h200)
    assert any(reason in p for p in problems), problems


@pytest.mark.nvcc
def test_sampled_valid_configs_compile_without_spills(space, h200, cache_dir):
    configs = [default(space), default(space, BM=128, WG=2, STAGES=3, FOLD=1)] + sample_valid(space, h200, SHAPE, 4, 2)
    results = compile_all(space, configs, cache_dir)
    failed = [(c, r.error) for c, r in zip(configs, results) if not r.ok]
    assert not failed, failed[:3]
    for config, result in zip(configs, results):
        kernel = result.kernels["gemm_wgmma_tma"]
        assert kernel.spill_stores == 0 and kernel.spill_loads == 0 and kernel.stack_bytes == 0, config
        assert "gemm_tf32_split" in result.kernels and "gemm_splitk_reduce" in result.kernels


@pytest.mark.nvcc
@pytest.mark.skipif(not shutil.which("cuobjdump"), reason="cuobjdump is not installed")
def test_default_runs_tf32_hgmma_fed_by_tma(space, cache_dir):
    (result,) = compile_all(space, [default(space)], cache_dir)
    sass = subprocess.run(["cuobjdump", "-sass", result.cubin], capture_output=True, text=True, check=True).stdout
    assert "HGMMA.64x128x8.F32.TF32" in sass and "UTMALDG" in sass
