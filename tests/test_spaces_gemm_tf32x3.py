"""The tensor-core TF32 algorithms: ``tf32x3`` in ``gemm`` (FP32-accurate) and ``tf32`` in the separate
``gemm_tf32`` family. Constraints against the template's static_asserts (nvcc), SASS, round trips."""

import dataclasses
import random
import shutil
import subprocess

import numpy as np
import optuna
import pytest

from autotune.results.storage import BestEntry, Database, resolve_url
from autotune.spaces import ALGO, Launch, config_key, get_space, kernel_names
from autotune.spaces.enumeration import random_config
from autotune.spaces.gemm_tf32 import TF32_TOLERANCE
from autotune.spaces.gemm_tf32x3 import FOLD_SPAN
from autotune.spaces.optuna_mapping import optuna_params, suggest
from autotune.templates import template_path
from space_checks import compile_all, sample_valid, template_defaults

SHAPE = (4096, 4096, 4096)
SPACES = {"tf32x3": ("gemm", {ALGO: ["tf32x3"]}), "tf32": ("gemm_tf32", None)}


def space_of(algo: str):
    kernel, domains = SPACES[algo]
    return get_space(kernel, domains)


@pytest.fixture(params=list(SPACES))
def space(request):
    return space_of(request.param)


@pytest.fixture
def a100(h200):
    return dataclasses.replace(h200, name="NVIDIA A100", compute_capability=(8, 0), smem_per_block_optin=166912,
                               smem_per_multiprocessor=167936, multiprocessors=108)  # fmt: skip


def test_tf32x3_default_config_is_the_templates_defaults():
    space = space_of("tf32x3")
    defaults = template_defaults("gemm_tf32x3.cu")
    rendered = space.defines(space.default_config)
    assert space.default_config[ALGO] == "tf32x3"
    assert rendered == {k: defaults[k] for k in rendered if k != "DTYPE"} | {"DTYPE": 0}
    assert set(defaults) - {"DTYPE"} == set(rendered) - {"DTYPE"}, "every tunable macro of the template is rendered"


def test_split_k_launches_into_a_workspace_then_reduces(space, h200):
    config = {**space.default_config, "BM": 32, "WARPS_M": 2, "SPLIT_K": 4}
    shape = (127, 4096, 4096)
    assert space.violations(config, shape, h200) == []
    gemm, reduce = space.launches(config, shape, h200)
    assert gemm.grid == (4 * 32, 1, 4), "split-K is the grid's z dimension"
    assert gemm.args[2] == "partial" and reduce.kernel == "gemm_splitk_reduce" and reduce.args[:2] == ("partial", "C")
    assert space.workspace(config, shape)["partial"].shape == (4, 127, 4096)
    assert "SPLIT_K" not in space.defines(config), "a launch choice: one compiled kernel for every split"
    assert space.defines(config) == space.defines({**config, "SPLIT_K": 1})
    (alone,) = space.launches({**config, "SPLIT_K": 1}, shape, h200)
    assert alone.args[2] == "C" and alone.grid[2] == 1 and space.workspace({**config, "SPLIT_K": 1}, shape) == {}


def test_tf32_is_the_template_without_compensation():
    space = space_of("tf32")
    assert "FOLD" not in space.default_config and "COMPENSATE" not in space.defines(space.default_config)
    wrapper = template_path(space.template_for(space.default_config)).read_text()
    assert "#define COMPENSATE 0\n" in wrapper and "#define FOLD 0\n" in wrapper
    assert '#include "gemm_tf32x3.cu"' in wrapper


def test_default_config_is_valid_on_hopper_and_ampere(space, h200, a100):
    assert space.violations(space.default_config, SHAPE, h200) == []
    assert space.violations(space.default_config, SHAPE, a100) == []


def test_tensor_cores_need_sm80(space, h200):
    turing = dataclasses.replace(h200, compute_capability=(7, 5))
    assert "needs compute capability 8.0" in space.violations(space.default_config, SHAPE, turing)[0]


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"BM": 32, "WARPS_M": 4}, "16x8 mma tiles"),
        ({"BN": 32, "WARPS_N": 4, "BM": 64}, None),  # warp tile 32x8: one mma tile along N is fine
        ({"BM": 256, "BN": 256, "WARPS_M": 2, "WARPS_N": 2}, "registers"),
        ({"MIN_BLOCKS": 2, "STAGES": 2}, "registers"),
        ({"BM": 256, "BN": 256, "BK": 64, "STAGES": 5, "WARPS_M": 4, "WARPS_N": 4}, "shared memory"),
        ({"STAGES": 5, "MIN_BLOCKS": 2, "BM": 64, "WARPS_M": 1}, "shared memory"),
    ],
)
def test_constraints_explain_themselves(space, h200, change, reason):
    problems = space.violations({**space.default_config, **change}, SHAPE, h200)
    if reason is None:
        assert problems == []
    else:
        assert any(reason in p for p in problems), problems


def test_level_one_windows_are_bounded(h200):
    space = space_of("tf32x3")
    for bk in space.domain("BK"):
        for fold in space.domain("FOLD"):
            problems = space.violations({**space.default_config, "BK": bk, "FOLD": fold}, SHAPE, h200)
            assert (fold * bk > FOLD_SPAN) == any("level-1 window" in p for p in problems), (bk, fold)


def test_most_of_the_space_is_valid(space, h200):
    rng = random.Random(0)
    draws = [random_config(space, rng) for _ in range(2000)]
    valid = sum(not space.violations(c, SHAPE, h200) for c in draws)
    assert valid / len(draws) > 0.15  # rejected before compiling: cheap, but not the bulk of draws


def test_launch_geometry(space, h200):
    config = {**space.default_config, "BM": 64, "BN": 128, "WARPS_M": 1, "WARPS_N": 4, "BK": 16, "STAGES": 3}
    (launch,) = space.launches(config, (1000, 300, 77), h200)
    assert isinstance(launch, Launch) and launch.kernel == "gemm_tf32"
    assert launch.grid == (16 * 3, 1, 1)  # ceil(1000/64) * ceil(300/128)
    assert launch.block == (128, 1, 1)
    assert launch.shared_bytes == 4 * 3 * (64 * (16 + 4) + 16 * (128 + 8))  # padded A and B tiles, 3 stages
    assert [a for a in launch.args if isinstance(a, str)] == ["A", "B", "C"]
    assert [int(a) for a in launch.args[3:]] == [1000, 300, 77]
    assert all(isinstance(a, np.int32) for a in launch.args[3:])


def test_validation_cases_are_ragged_against_the_mma_tiles(space):
    cases = [s for s, _ in space.validation_cases(SHAPE)]
    assert any(k % 8 for _, _, k in cases), "K no multiple of the mma K"
    assert any(m % 16 and n % 8 for m, n, _ in cases), "M and N ragged against the mma tile"
    assert any(k >= 16384 for _, _, k in cases), "a long K (round-toward-zero accumulation)"


# --- the accuracy contract: 1×TF32 never answers float32 gemm ------------------------------------------------
def test_tf32_is_its_own_kernel_and_never_an_algorithm_of_gemm():
    assert "gemm_tf32" in kernel_names()
    for dtype in get_space("gemm").supported_dtypes():
        assert "tf32" not in get_space("gemm", dtype=dtype).algos
    assert "tf32x3" in get_space("gemm").domain(ALGO)
    assert get_space("gemm_tf32").supported_dtypes() == ("float32",)


def test_tolerances():
    tf32 = space_of("tf32")
    assert tf32.baseline_config() is None
    assert tf32.tolerance("C", SHAPE) == TF32_TOLERANCE
    # tf32x3 narrowed to itself is still held to the SIMT kernel's error on the same inputs
    tf32x3 = space_of("tf32x3")
    assert tf32x3.baseline_config()[ALGO] == "simt"
    assert tf32x3.baseline_tolerance("C", 3e-6, (61, 70, 16384)) == pytest.approx(6e-6)


def test_round_trip_through_the_study_and_the_best_table(tmp_path, h200):
    """Configurations → enqueued trials → asked define-by-run → stored best rows → valid configurations."""
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    rng = random.Random(5)
    for algo in SPACES:
        space = space_of(algo)
        configs = []
        while len(configs) < 4:
            c = random_config(space, rng)
            if not space.violations(c, SHAPE, h200):
                configs.append(c)
        study = optuna.create_study(storage=storage, study_name=algo)
        for c in configs:
            study.enqueue_trial(optuna_params(space, c))
        asked = []
        for _ in configs:
            trial = study.ask()
            asked.append(suggest(space, trial))
            study.tell(trial, 1.0)
        assert [config_key(c) for c in asked] == [config_key(c) for c in configs]
        db = Database(resolve_url(tmp_path / "b.db"))
        db.save_best(BestEntry(
            device_name="NVIDIA H200", compute_capability="9.0", kernel=space.name, shape="4096x4096x4096",
            dtype="float32", template_hash=space.template_hash(), params=asked[0], time_ms=1.0, metric=1.0,
            metric_unit="TFLOP/s", default_time_ms=None, driver_version="d", nvcc_version="n", study_name=algo,
            trial_number=0,
        ))  # fmt: skip
        (row,) = db.best(kernel=space.name)
        db.close()
        assert row.config == configs[0]
        space.require_valid(row.config, SHAPE, h200)


# --- the template (nvcc) -------------------------------------------------------------------------------------
@pytest.mark.nvcc
def test_sampled_valid_configs_compile_without_spilling(space, h200, cache_dir):
    configs = [space.default_config, *sample_valid(space, h200, SHAPE, 10, seed=1)]
    results = compile_all(space, configs, cache_dir, "sm_90")
    failed = [(c, r.error) for c, r in zip(configs, results) if not r.ok]
    assert not failed, failed[:3]
    assert all(r.registers > 0 and "gemm_tf32" in r.kernels for r in results)
    spilled = [(space.describe(c), r.registers, r.spill_bytes) for c, r in zip(configs, results) if r.spill_bytes]
    assert not spilled, spilled


@pytest.mark.nvcc
def test_template_rejects_what_the_space_rejects(space, h200, cache_dir):
    """Configurations the constraints reject for their tile geometry or FOLD fail the template's static_asserts."""
    rng = random.Random(3)
    bad = []
    while len(bad) < 4:
        config = random_config(space, rng)
        problems = space.violations(config, SHAPE, h200)
        if problems and ("mma tiles" in problems[0] or "level-1 window" in problems[0]):
            bad.append(config)
    results = compile_all(space, bad, cache_dir, "sm_90")
    assert all(not r.ok and "static assertion" in (r.error or "") for r in results), [r.error for r in results]


def sass(cubin: str) -> str:
    tool = shutil.which("cuobjdump")
    if tool is None:
        pytest.skip("cuobjdump is not installed")
    out = subprocess.run([tool, "-sass", cubin], capture_output=True, text=True)
    if out.returncode:
        pytest.skip(f"cuobjdump cannot disassemble here: {out.stderr.strip()[:200]}")
    return out.stdout


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_sass_issues_tf32_hmma_three_times_per_product_with_compensation(arch, cache_dir):
    counts = {}
    for algo in SPACES:
        space = space_of(algo)
        (result,) = compile_all(space, [space.default_config], cache_dir, arch)
        assert result.ok, result.error
        counts[algo] = sass(result.cubin).count("HMMA.1688.F32.TF32")
    assert counts["tf32"] > 0
    assert counts["tf32x3"] == 3 * counts["tf32"]
