"""linear_swiglu (autotune/spaces/linear_swiglu.py): C = silu(A·Gᵀ)·(A·Uᵀ) from one weight [G; U] stored 2N×K, on
the TMA kernel's SwiGLU epilogue (kernel_templates/gemm_wgmma_tma.cu, GEMM_SWIGLU)."""

import numpy as np
import pytest

from autotune.errors import InvalidArgument
from autotune.spaces import ALGO, Launch, TensorMap, get_space

from conftest import H200
from space_checks import assert_built_without_spills, compile_jobs

DTYPES = ("float16", "bfloat16")
SHAPES = [(1, 14336, 4096), (16, 14336, 4096), (2048, 14336, 4096), (333, 264, 104), (67, 40, 40)]


def test_reference_is_silu_of_the_gate_half_times_the_up_half():
    space = get_space("linear_swiglu", dtype="bfloat16")
    shape = (67, 40, 40)
    assert space.input_specs(shape)["B"].shape == (80, 40) and space.outputs(shape)["C"].shape == (67, 40)
    inputs = space.decoded_inputs(space.inputs(shape, np.random.default_rng(0)), shape)
    a, b = inputs["A"], inputs["B"]
    gate, up = a @ b[:40].T, a @ b[40:].T
    ref = space.reference(inputs, shape)["C"]
    assert np.allclose(ref, gate * (1.0 / (1.0 + np.exp(-gate))) * up, rtol=1e-12, atol=1e-12)
    assert 0.1 < np.abs(gate).mean() < 3  # the inputs reach silu's curve, not only its linear tail
    assert space.tolerance("C", shape) == get_space("gemm", dtype="bfloat16").tolerance("C", shape)


def test_shape_from_the_operands_and_bad_ones_refused():
    space = get_space("linear_swiglu", dtype="float16")
    assert space.infer_shape({"A": (8, 64), "B": (6, 64)}) == (8, 3, 64)
    with pytest.raises(InvalidArgument, match="gate rows, then as many up rows"):
        space.infer_shape({"A": (8, 64), "B": (7, 64)})
    with pytest.raises(InvalidArgument, match="A has 64 columns but B has 32"):
        space.infer_shape({"A": (8, 64), "B": (6, 32)})
    assert space.flatten_leading({"A": (2, 4, 64), "B": (6, 64)}) == ({"A": (8, 64), "B": (6, 64)}, (2, 4))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rule_default_is_valid_and_its_plan_reads_both_halves(dtype, shape):
    space = get_space("linear_swiglu", dtype=dtype)
    config = space.rule_default(shape, H200)
    assert space.violations(config, shape, H200) == []
    launch, *reduce = space.launches(config, shape, H200)
    m, n, k = shape
    if m <= 32:  # decoding: the transposed product, gate and up rows of the same columns in each stage
        assert config[ALGO] == "wgmma_skinny" and launch.kernel == "gemm_wgmma_skinny" and not reduce
        assert launch.args[0] == TensorMap("B", dtype, dims=(k, 2 * n), box=(64, config["BN"]))
        assert launch.grid == (-(-n // config["BN"]), -(-m // config["BM"]), config["SPLIT_K"])
        assert -(-n // config["BN"]) * config["SPLIT_K"] >= 0.9 * H200.multiprocessors or config["SPLIT_K"] == 1
        defines = space.defines(config)
        assert defines["GEMM_SWIGLU"] == 1 and defines["B_K_MAJOR"] == 1 and "GEMM_BIAS" not in defines
        return
    assert isinstance(launch, Launch) and launch.kernel == "gemm_wgmma_tma"
    b = launch.args[1]
    assert isinstance(b, TensorMap) and b.buffer == "B" and b.dims == (k, 2 * n)
    tiles = -(-m // config["BM"]) * -(-n // (config["BN"] // 2))
    splits = config["SPLIT_K"]
    # decoding's few tiles: K split until every SM has one, where K is long enough (256 per slice at least)
    assert (splits > 1) == (tiles < H200.multiprocessors and k >= 2 * 256)
    assert launch.grid[0] == min(tiles, H200.multiprocessors // splits) and launch.grid[2] == splits
    assert launch.args[2] == ("C" if splits == 1 else "partial") and len(reduce) == (splits > 1)
    defines = space.defines(config)
    assert defines["GEMM_SWIGLU"] == 1 and defines["B_K_MAJOR"] == 1 and "SPLIT_K" not in defines


def test_split_k_stores_gate_and_up_planes_then_reduces_them_with_the_activation():
    space = get_space("linear_swiglu", dtype="bfloat16")
    shape = (16, 14336, 4096)
    tma = space.algos["wgmma_tma"]
    config = {ALGO: "wgmma_tma", **tma.default_config, "BM": 64, "BN": 256, "WG": 1, "SPLIT_K": 3}
    assert space.violations(config, shape, H200) == []
    main, reduce = space.launches(config, shape, H200)
    assert main.args[2] == "partial" and main.grid[2] == 3
    assert reduce.kernel == "gemm_splitk_swiglu" and reduce.args[:2] == ("partial", "C")
    assert int(reduce.args[2]) == 16 * 14336 and int(reduce.args[3]) == 3
    assert space.workspace(config, shape)["partial"].shape == (3, 2, 16, 14336)
    assert space.workspace({**config, "SPLIT_K": 1}, shape) == {}
    assert space.violations({**config, "SPLIT_K": 32}, (16, 14336, 1024), H200)  # more slices than k-tiles


def test_no_tile_the_epilogue_cannot_pair():
    space = get_space("linear_swiglu", dtype="bfloat16")
    assert space.domain("wgmma_tma.BN") == (128, 256)
    assert space.algos["wgmma_tma"].unfit((64, 64, 100), H200) is not None  # K: TMA strides of 16 bytes


@pytest.mark.nvcc
def test_tiles_compile_without_spills(cache_dir):
    jobs = []
    for dtype in DTYPES:
        space = get_space("linear_swiglu", dtype=dtype)
        tma = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config}
        tiles = ({}, {"BM": 64, "BN": 256, "WG": 1}, {"BM": 256, "BN": 128}, {"PINGPONG": 1, "BN": 128},
                 {"CLUSTER_M": 2}, {"BM": 64, "WG": 1, "SPLIT_K": 2})
        jobs += [(space, {**tma, **t}, (2048, 14336, 4096)) for t in tiles]
        skinny = {ALGO: "wgmma_skinny", **space.algos["wgmma_skinny"].default_config}
        few = ({}, {"BM": 64, "BN": 128, "WG": 1, "STAGES": 4}, {"BM": 128, "BN": 128, "WG": 2, "STAGES": 3})
        jobs += [(space, {**skinny, **t}, (127, 14336, 4096)) for t in few]
    results = compile_jobs(jobs, "sm_90a", cache_dir)
    assert_built_without_spills(jobs, results)
