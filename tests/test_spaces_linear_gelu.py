"""linear_gelu (autotune/spaces/linear_gelu.py): linear with GELU (tanh form) after the bias, and the sum before it
kept as the output ``pre``; in the TMA kernel's epilogue or by gemm_bias_gelu after the product."""

import numpy as np
import pytest

from autotune.spaces import ALGO, Launch, get_space

from conftest import H200
from plan_emulation import emulate_outputs
from space_checks import assert_built_without_spills, compile_jobs

DTYPES = ("float32", "float16", "bfloat16")
SHAPES = [(1, 3072, 768), (8, 3072, 768), (200, 2304, 768), (8192, 3072, 768), (333, 264, 104), (67, 131, 33),
          (1000, 1000, 1001)]


def torch_gelu_tanh(x: np.ndarray) -> np.ndarray:
    """torch's formula (aten GeluCUDAKernelImpl, approximate="tanh"), written out again here."""
    inner = np.sqrt(2.0) * (2.0 / np.sqrt(np.pi)) * 0.5 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + np.tanh(inner))


@pytest.mark.parametrize("dtype", DTYPES)
def test_outputs_and_reference_are_gelu_of_linear_and_the_sum_before_it(dtype):
    space = get_space("linear_gelu", dtype=dtype)
    shape = (67, 131, 33)
    assert set(space.outputs(shape)) == {"C", "pre"} and space.outputs(shape)["pre"].shape == (67, 131)
    inputs = space.inputs(shape, np.random.default_rng(0))
    ref = space.reference(inputs, shape)
    a, b, bias = (np.asarray(inputs[k], np.float64) for k in ("A", "B", "bias"))
    assert np.allclose(ref["pre"], a @ b.T + bias, rtol=1e-12, atol=1e-12)
    assert np.allclose(ref["C"], torch_gelu_tanh(ref["pre"]), rtol=1e-12, atol=1e-12)
    assert space.tolerance("C", shape) == space.tolerance("pre", shape) == get_space("linear", dtype=dtype).tolerance(
        "C", shape)


def test_same_algorithms_tunables_and_rule_defaults_as_linear():
    for dtype in DTYPES:
        ours, linear = get_space("linear_gelu", dtype=dtype), get_space("linear", dtype=dtype)
        assert list(ours.algos) == list(linear.algos)
        for shape in SHAPES:
            assert ours.rule_default(shape, H200) == linear.rule_default(shape, H200), (dtype, shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_plan_ends_in_the_gelu_epilogue_once(dtype, shape):
    """Each algorithm's plan applies GELU exactly once: in the product's epilogue where no split-K reduce follows it
    (the TMA kernel unsplit; wgmma_skinny, whose slices meet in the kernel), else by gemm_bias_gelu after the
    product (and after the reduce), never gemm_bias_add."""
    space = get_space("linear_gelu", dtype=dtype)
    for name, algo in space.algos.items():
        if algo.unfit(shape, H200):
            continue
        for split in (1, 2):
            config = {"ALGO": name, **algo.default_config}
            if "SPLIT_K" in config:
                config["SPLIT_K"] = split
            elif split > 1:
                continue
            if space.violations(config, shape, H200):
                continue
            steps = [s for s in space.launches(config, shape, H200) if isinstance(s, Launch)]
            kernels = [s.kernel for s in steps]
            assert "gemm_bias_add" not in kernels
            defines = space.defines(config)
            in_kernel = defines.get("GEMM_GELU") == 1 and defines.get("GEMM_BIAS") == 1
            product = next(s for s in steps if s.kernel.startswith("gemm_") and "pre" in s.args) if in_kernel else None
            if in_kernel and not any(k.startswith("gemm_splitk") for k in kernels):
                assert "gemm_bias_gelu" not in kernels, (name, kernels)
                c = product.args.index("C")
                assert product.args[c + 1:c + 3] == ("bias", "pre")
            else:
                assert kernels[-1] == "gemm_bias_gelu" and kernels.count("gemm_bias_gelu") == 1, (name, kernels)
                assert steps[-1].args[:3] == ("C", "bias", "pre")
                assert defines.get("GEMM_GELU") == 1, "gemm_layout.cuh compiles gemm_bias_gelu under GEMM_GELU"


@pytest.mark.parametrize("algo, change, shape", [
    ("wgmma_tma", {}, (264, 136, 520)),
    ("wgmma_tma", {"SPLIT_K": 2}, (264, 136, 520)),
    ("wgmma_tma_padded", {}, (300, 264, 333)),
], ids=["tma", "tma-split2", "padded"])  # fmt: skip
def test_plans_compute_gelu_of_linear_when_emulated(h200, algo, change, shape):
    space = get_space("linear_gelu", dtype="bfloat16")
    config = {"ALGO": algo, **space.algos[algo].default_config, "BN": 128, "STAGES": 6, **change}
    assert space.violations(config, shape, h200) == []
    rng = np.random.default_rng(3)
    i = {name: rng.standard_normal(spec.shape) for name, spec in space.input_specs(shape).items()}
    pre = i["A"] @ i["B"].T + i["bias"]
    out = emulate_outputs(space, config, shape, h200, i)
    assert np.allclose(out["pre"], pre, rtol=1e-10, atol=1e-9)
    assert np.allclose(out["C"], torch_gelu_tanh(pre), rtol=1e-10, atol=1e-9)


@pytest.mark.nvcc
def test_defaults_and_rule_defaults_compile_without_spills(cache_dir):
    jobs = []
    for dtype in DTYPES:
        space = get_space("linear_gelu", dtype=dtype)
        configs = [dict(space.default_config)]
        configs += [space.rule_default(s, H200) for s in ((8192, 3072, 768), (8, 3072, 768), (1000, 1000, 1001))]
        if dtype != "float32":  # the epilogue's read-back at every consumer tile (rows × columns) the space allows
            tma = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config}
            tiles = ({"WG": 1, "BM": 64, "BN": 192, "STAGES": 6}, {"WG": 1, "BM": 64, "BN": 64},
                     {"BM": 256, "BN": 128, "STAGES": 3}, {"PINGPONG": 1, "BN": 128})
            configs += [{**tma, **v} for v in tiles]
        jobs += [(space, c, (8192, 3072, 768)) for c in configs]
    results = compile_jobs(jobs, "sm_90a", cache_dir)
    assert_built_without_spills(jobs, results)
    for (space, config, shape), result in zip(jobs, results):
        launched = {s.kernel for s in space.launches(config, shape, H200) if isinstance(s, Launch)}
        assert launched <= set(result.kernels), (space.name, space.dtype, launched, result.kernels)
