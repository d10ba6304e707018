"""The TMA + warp-specialised persistent wgmma GEMM's space (autotune/spaces/gemm_wgmma_tma.py) on the CPU:
defaults, constraints, the launch with its tensor maps, and sm_90a compiles of sampled configurations."""

import dataclasses
import shutil
import subprocess

import numpy as np
import pytest

from autotune.spaces import ALGO, Launch, get_space
from autotune.spaces.base import TensorMap
from autotune.spaces.enumeration import random_config
from autotune.spaces.gemm_layouts import LAYOUT_DEFINES

from space_checks import compile_all, sample_valid, template_defaults

SHAPE = (4096, 4096, 4096)
ALGORITHM = "wgmma_tma"


@pytest.fixture(params=["float16", "bfloat16"])
def space(request):
    return get_space("gemm", {ALGO: [ALGORITHM]}, dtype=request.param)


def default(space, **change):
    return {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config, **change}


def test_offered_for_half_types_only():
    assert ALGORITHM not in get_space("gemm", dtype="float32").domain(ALGO), "16-bit products never answer fp32"
    for dtype in ("float16", "bfloat16"):
        assert ALGORITHM in get_space("gemm", dtype=dtype).domain(ALGO)


def test_default_config_is_the_templates_defaults(space):
    rendered = space.defines(default(space))
    assert rendered.pop("DTYPE") == (1 if space.dtype == "float16" else 2)
    defaults = template_defaults("gemm_wgmma_tma.cu")
    assert rendered == {k: defaults[k] for k in rendered}
    # The operand layouts and the bias are the layout families' (tests/test_spaces_gemm_layouts.py), off here.
    assert {k: defaults.pop(k) for k in LAYOUT_DEFINES} == dict.fromkeys(LAYOUT_DEFINES, 0)
    assert defaults.pop("STREAM_K") == 0, "the wgmma_tma_streamk algorithm's (tests/test_spaces_gemm_wgmma_tma_streamk.py)"
    assert set(defaults) == set(rendered), "every tunable macro of the template is a parameter"


def test_default_config_is_valid_on_hopper(space, h200):
    assert space.violations(default(space), SHAPE, h200) == []


@pytest.mark.parametrize("cc", [(8, 0), (8, 9), (10, 0)])
def test_sm90a_code_is_rejected_off_compute_capability_9_0(space, h200, cc):
    other = dataclasses.replace(h200, compute_capability=cc)
    assert space.algos[ALGORITHM].unfit(SHAPE, other) is not None
    assert space.violations(default(space), SHAPE, other)


@pytest.mark.parametrize("shape", [(4096, 4100, 4096), (4096, 4096, 4097), (64, 64, 1)])
def test_shapes_with_unaligned_rows_are_left_to_other_algorithms(space, h200, shape):
    """TMA strides are multiples of 16 bytes: N and K must be multiples of 8; M is free."""
    reason = space.algos[ALGORITHM].unfit(shape, h200)
    assert reason is not None and "multiples of 8" in reason
    assert any("multiples of 8" in p for p in space.violations(default(space), shape, h200))
    narrowed = get_space("gemm", dtype=space.dtype).for_problem(shape, h200)
    assert ALGORITHM not in narrowed.domain(ALGO), "the search never proposes it there"
    assert space.algos[ALGORITHM].unfit((4093, 4096, 4096), h200) is None


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"PINGPONG": 1, "WG": 1}, "ping-pong needs two consumer warpgroups"),
        ({"BM": 64, "WG": 2, "PINGPONG": 0}, "rows per consumer"),
        ({"BM": 256, "WG": 1, "BN": 64}, "rows per consumer"),
        ({"BM": 128, "WG": 1, "BN": 256}, "accumulators"),
        ({"BM": 128, "PINGPONG": 1, "BN": 256}, "accumulators"),
        ({"BM": 256, "BN": 256, "STAGES": 4}, "shared memory"),
    ],
)
def test_constraints_explain_themselves(space, h200, change, reason):
    problems = space.violations(default(space, **change), SHAPE, h200)
    assert any(reason in p for p in problems), problems


def test_192_accumulators_per_consumer_but_not_with_the_bias_epilogue(space, h200):
    """A consumer may hold 192 accumulators (the template gives two consumers 240 registers each): ping-pong
    128×192, cooperative 256×192. linear's bias epilogue spills there, so the linear family refuses them."""
    for change in ({"PINGPONG": 1, "BM": 128, "BN": 192, "STAGES": 5}, {"BM": 256, "BN": 192}):
        assert space.violations(default(space, **change), SHAPE, h200) == [], change
        linear = get_space("linear", dtype=space.dtype)
        problems = linear.violations(default(space, **change), SHAPE, h200)
        assert any("bias epilogue spill" in p for p in problems), problems
        assert get_space("gemm_nt", dtype=space.dtype).violations(default(space, **change), SHAPE, h200) == []


def test_a_fair_share_of_the_space_is_valid(space, h200):
    import random

    rng = random.Random(0)
    draws = [random_config(space, rng) for _ in range(2000)]
    valid = sum(not space.violations(c, SHAPE, h200) for c in draws)
    assert valid / len(draws) > 0.2


def test_launch_is_persistent_and_passes_tensor_maps(space, h200):
    config = default(space, BM=128, BN=128, STAGES=3, GROUP_M=1)
    (launch,) = space.launches(config, (1000, 304, 72), h200)
    assert isinstance(launch, Launch) and launch.kernel == "gemm_wgmma_tma"
    assert launch.grid == (8 * 3, 1, 1), "fewer tiles than SMs: one block per tile"
    (launch,) = space.launches(config, SHAPE, h200)
    assert launch.grid == (h200.multiprocessors, 1, 1), "more tiles than SMs: one block per SM walks them"
    assert launch.block == (384, 1, 1), "two consumer warpgroups and the producer"
    assert launch.shared_bytes == 3 * (128 + 128) * 64 * 2 + 1024 + 16 * 3 + 16
    a, b, c, *scalars = launch.args
    assert a == TensorMap("A", space.dtype, dims=(4096, 4096), box=(64, 128)) and a.problems() == []
    assert b == TensorMap("B", space.dtype, dims=(4096, 4096), box=(64, 64)) and b.problems() == []
    assert c == "C" and [int(s) for s in scalars] == list(SHAPE) and all(isinstance(s, np.int32) for s in scalars)
    (launch,) = space.launches(default(space, BM=128, PINGPONG=1, BN=128), (1000, 304, 72), h200)
    assert launch.args[0].box == (64, 128), "ping-pong: a whole BM-row tile per consumer"
    (launch,) = space.launches(default(space, CLUSTER_M=2, BN=128), (1000, 304, 72), h200)
    assert launch.grid == (2 * 4 * 3, 1, 1), "clusters of two along M: ceil(1000/256) x ceil(304/128) pairs"
    (launch,) = space.launches(default(space, CLUSTER_M=2), SHAPE, h200)
    assert launch.grid == (h200.multiprocessors // 2 * 2, 1, 1) and launch.grid[0] % 2 == 0


def test_split_k_is_a_launch_choice_with_a_workspace_and_a_reduce(space, h200):
    config = default(space, BM=128, BN=128, SPLIT_K=4)
    assert "SPLIT_K" not in space.defines(config), "the same cubin for every split"
    main, reduce = space.launches(config, (256, 256, 65536), h200)
    assert main.grid == (4, 1, 4), "four tiles per K slice, four slices"
    assert main.args[2] == "partial" and reduce.kernel == "gemm_splitk_reduce" and reduce.args[:2] == ("partial", "C")
    assert space.workspace(config, (256, 256, 65536))["partial"].shape == (4, 256, 256)
    (main, _) = space.launches(default(space, SPLIT_K=4), SHAPE, h200)
    assert main.grid == (h200.multiprocessors // 4, 1, 4), "the persistent grid is shared among the slices"
    problems = space.violations(default(space, SPLIT_K=4), (4096, 4096, 72), h200)
    assert any("exceeds the 2 k-tiles" in p for p in problems), "a slice per k-tile at most"


def test_validation_covers_ragged_tiles_and_a_long_k_that_tma_can_take(space, h200):
    cases = [s for s, _ in space.validation_cases(SHAPE)]
    fit = [s for s in cases if space.algos[ALGORITHM].unfit(s, h200) is None]
    assert any(m % 64 and n % 64 and k % 64 for m, n, k in fit), "boxes reaching past M, N and K"
    assert any(k >= 16384 for _, _, k in fit), "the wide-range long-K accuracy case"


@pytest.mark.nvcc
def test_sampled_valid_configs_compile_without_spills(space, h200, cache_dir):
    configs = [default(space), default(space, PINGPONG=1, BM=128, BN=128, CLUSTER_M=2)]
    # 192 accumulators per consumer (240 registers after setmaxnreg): a ping-pong 128×192 tile, a 256×192 one
    configs += [default(space, PINGPONG=1, BM=128, BN=192, STAGES=5), default(space, BM=256, BN=192, CLUSTER_M=2)]
    configs += sample_valid(space, h200, SHAPE, 6, 1)
    results = compile_all(space, configs, cache_dir)
    failed = [(c, r.error) for c, r in zip(configs, results) if not r.ok]
    assert not failed, failed[:3]
    for config, result in zip(configs, results):
        kernel = result.kernels["gemm_wgmma_tma"]
        assert kernel.spill_stores == 0 and kernel.spill_loads == 0 and kernel.stack_bytes == 0, config


@pytest.mark.nvcc
@pytest.mark.skipif(not shutil.which("cuobjdump"), reason="cuobjdump is not installed")
def test_default_runs_on_hgmma_fed_by_tma(space, cache_dir):
    (result,) = compile_all(space, [default(space)], cache_dir)
    sass = subprocess.run(["cuobjdump", "-sass", result.cubin], capture_output=True, text=True, check=True).stdout
    assert "HGMMA.64x256x16.F32" in sass and "UTMALDG" in sass
    assert "HMMA" not in sass.replace("HGMMA", "")
