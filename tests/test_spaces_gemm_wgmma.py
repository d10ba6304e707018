import dataclasses
import random
import shutil
import subprocess

import numpy as np
import pytest

from autotune.spaces import ALGO, Launch, get_space
from autotune.spaces.enumeration import random_config
from space_checks import compile_all, sample_valid, template_defaults

SHAPE = (4096, 4096, 4096)


@pytest.fixture(params=["float16", "bfloat16"])
def space(request):
    return get_space("gemm", {ALGO: ["wgmma"]}, dtype=request.param)


def test_offered_for_half_types_only():
    assert "wgmma" not in get_space("gemm", dtype="float32").domain(ALGO), "16-bit products never answer fp32"
    for dtype in ("float16", "bfloat16"):
        assert "wgmma" in get_space("gemm", dtype=dtype).domain(ALGO)


def test_default_config_is_the_templates_defaults(space):
    config = {ALGO: "wgmma", **space.algos["wgmma"].default_config}
    rendered = space.defines(config)
    assert rendered.pop("DTYPE") == (1 if space.dtype == "float16" else 2)
    defaults = template_defaults("gemm_wgmma.cu")
    assert rendered == {k: defaults[k] for k in rendered}
    assert set(defaults) == set(rendered), "every tunable macro of the template is a parameter"


def test_default_config_is_valid_on_hopper(space, h200):
    config = {ALGO: "wgmma", **space.algos["wgmma"].default_config}
    assert space.violations(config, SHAPE, h200) == []


@pytest.mark.parametrize("cc, message", [((8, 0), "needs compute capability 9.0"), ((8, 9), "needs compute"),
                                         ((10, 0), "9.0 at most"), ((12, 0), "9.0 at most")])  # fmt: skip
def test_sm90a_code_is_rejected_off_compute_capability_9_0(space, h200, cc, message):
    other = dataclasses.replace(h200, compute_capability=cc)
    config = {ALGO: "wgmma", **space.algos["wgmma"].default_config}
    (problem,) = space.violations(config, SHAPE, other)
    assert message in problem


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"BM": 64, "WG": 2}, "m64 slices"),
        ({"BM": 256, "WG": 1, "BN": 64}, "m64 slices per warpgroup (> 2)"),
        ({"BM": 128, "WG": 1, "BN": 256}, "accumulators"),
        ({"BM": 256, "WG": 2, "BN": 256}, "accumulators"),
        ({"BM": 128, "WG": 2, "BN": 256, "STAGES": 5}, "shared memory"),
    ],
)
def test_constraints_explain_themselves(space, h200, change, reason):
    config = {ALGO: "wgmma", **space.algos["wgmma"].default_config, **change}
    problems = space.violations(config, SHAPE, h200)
    assert any(reason in p for p in problems), problems


def test_most_of_the_space_is_valid(space, h200):
    rng = random.Random(0)
    draws = [random_config(space, rng) for _ in range(2000)]
    valid = sum(not space.violations(c, SHAPE, h200) for c in draws)
    assert valid / len(draws) > 0.35


def test_launch_geometry(space, h200):
    config = {ALGO: "wgmma", "BM": 128, "BN": 128, "WG": 2, "STAGES": 3, "GROUP_M": 1, "WS": 0}
    (launch,) = space.launches(config, (1000, 300, 77), h200)
    assert isinstance(launch, Launch) and launch.kernel == "gemm_wgmma"
    assert launch.grid == (8 * 3, 1, 1)  # ceil(1000/128) * ceil(300/128)
    assert launch.block == (256, 1, 1)
    assert launch.shared_bytes == 3 * (128 + 128) * 64 * 2 + 1024 + 128
    (launch,) = space.launches({**config, "WS": 1}, (1000, 300, 77), h200)
    assert launch.block == (384, 1, 1), "a producer warpgroup besides the two computing ones"
    assert [a for a in launch.args if isinstance(a, str)] == ["A", "B", "C"]
    assert [int(a) for a in launch.args[3:]] == [1000, 300, 77]
    assert all(isinstance(a, np.int32) for a in launch.args[3:])


def test_validation_cases_are_ragged_against_every_tile(space):
    cases = [s for s, _ in space.validation_cases(SHAPE)]
    for m, n, k in cases:
        assert all(m % s and n % s for s in (64, 128, 256)), "ragged against every tile size"
    assert any(k % 64 and k % 8 for _, _, k in cases), "K ragged against BK and against 16-byte chunks"
    assert any(n % 8 == 0 and k % 8 == 0 for _, n, k in cases), "a shape taking the cp.async path"


@pytest.mark.nvcc
def test_sampled_valid_configs_compile_without_spills(space, h200, cache_dir):
    """Random valid configurations (the default among them) compile for sm_90a with no local memory."""
    default = {ALGO: "wgmma", **space.algos["wgmma"].default_config}
    configs = [default, {**default, "WS": 1}] + sample_valid(space, h200, SHAPE, 6, seed=1)
    results = compile_all(space, configs, cache_dir)
    failed = [(c, r.error) for c, r in zip(configs, results) if not r.ok]
    assert not failed, failed[:3]
    for config, result in zip(configs, results):
        (kernel,) = result.kernels.values()
        assert kernel.registers > 0
        assert kernel.spill_stores == 0 and kernel.spill_loads == 0 and kernel.stack_bytes == 0, config


@pytest.mark.nvcc
def test_template_rejects_what_the_space_rejects(space, h200, cache_dir):
    """Configurations the constraints reject for their tile geometry also fail the template's static_asserts."""
    rng = random.Random(3)
    bad = []
    while len(bad) < 4:
        config = random_config(space, rng)
        problems = space.violations(config, SHAPE, h200)
        if problems and any(w in problems[0] for w in ("slices", "accumulators", "shared memory")):
            bad.append(config)
    results = compile_all(space, bad, cache_dir)
    assert all(not r.ok and "static assertion" in (r.error or "") for r in results), [r.error for r in results]


@pytest.mark.nvcc
@pytest.mark.skipif(not shutil.which("cuobjdump"), reason="cuobjdump is not installed")
def test_default_issues_hgmma(space, cache_dir):
    """The default configuration's machine code runs on wgmma (HGMMA), not a slower tensor-core path."""
    config = {ALGO: "wgmma", **space.algos["wgmma"].default_config}
    (result,) = compile_all(space, [config], cache_dir)
    sass = subprocess.run(["cuobjdump", "-sass", result.cubin], capture_output=True, text=True, check=True).stdout
    assert "HGMMA.64x256x16.F32" in sass and "tnspB" in sass
    assert "HMMA" not in sass.replace("HGMMA", "")
