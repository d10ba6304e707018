"""The mma algorithm of gemm (float16 / bfloat16 on tensor cores): parameters against the template, constraints
against its static_asserts and ptxas, launch plans (split-K included), the study / best-table round trip, and on a
GPU, correctness of random valid configurations on ragged shapes."""

import dataclasses
import random
import re

import numpy as np
import pytest

from autotune.runtime.compiler import Compiler
from autotune.spaces import ALGO, Launch, config_key, get_space
from autotune.spaces.enumeration import random_config
from autotune.spaces.gemm_mma import MmaGemm
from autotune.spaces.optuna_mapping import config_of, optuna_params, suggest
from autotune.templates import template_path

SHAPE = (4096, 4096, 4096)
HALF = ("float16", "bfloat16")


@pytest.fixture(params=HALF)
def space(request):
    return get_space("gemm", {ALGO: ["mma"]}, dtype=request.param)


def template_defaults() -> dict[str, int]:
    text = template_path("gemm_mma.cu").read_text()
    return {m[0]: int(m[1]) for m in re.findall(r"#ifndef (\w+)\n#define \1 (\d+)\n#endif", text)}


def test_offered_for_half_dtypes_only():
    assert "mma" not in get_space("gemm").domain(ALGO)
    for name in HALF:
        space = get_space("gemm", dtype=name)
        assert "mma" in space.domain(ALGO)
        assert space.default_config[ALGO] == space.domain(ALGO)[0]


def test_default_config_is_the_templates_defaults(space):
    defaults = template_defaults()
    rendered = space.defines({ALGO: "mma", **MmaGemm.default_config})
    assert rendered.pop("DTYPE") == (1 if space.dtype == "float16" else 2)
    assert rendered == {k: defaults[k] for k in rendered}
    assert set(defaults) == set(rendered), "every tunable macro of the template is a parameter"


def test_default_config_is_valid_and_a_big_tile(space, h200):
    default = {ALGO: "mma", **MmaGemm.default_config}
    assert space.violations(default, SHAPE, h200) == []
    g = MmaGemm.geometry(default)
    assert g["accumulators"] == 128 and g["threads"] == 256  # 64x64 warp tiles, 8 warps
    assert MmaGemm.default_config["BM"] * MmaGemm.default_config["BN"] >= 128 * 256


def test_needs_sm80(space, h200):
    volta = dataclasses.replace(h200, compute_capability=(7, 5))
    default = {ALGO: "mma", **MmaGemm.default_config}
    assert "needs compute capability 8.0" in space.violations(default, SHAPE, volta)[0]


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"BM": 32, "WM": 64}, "does not split"),
        ({"BN": 64, "WN": 128}, "does not split"),
        ({"WM": 128, "WN": 64}, "accumulators"),
        ({"BM": 256, "BN": 256, "BK": 64, "STAGES": 5}, "shared memory"),
        ({"BM": 256, "BN": 256, "WM": 32, "WN": 32}, "threads per block"),
        ({"BM": 256, "BN": 256, "WM": 64, "WN": 32}, "registers"),
        ({"BK": 64, "DOUBLE_FRAGS": 1}, "registers"),
        ({"MIN_BLOCKS": 2}, "registers"),
        ({"BN": 128, "STAGES": 5, "BK": 64, "MIN_BLOCKS": 2}, "do not fit the SM's shared memory"),
        ({"BM": 16, "BN": 256, "BK": 64, "WM": 16, "WN": 128}, "too few threads"),
    ],
)
def test_constraints_explain_themselves(space, h200, change, reason):
    config = {ALGO: "mma", **MmaGemm.default_config, **change}
    problems = space.violations(config, SHAPE, h200)
    assert any(reason in p for p in problems), problems


def test_shared_memory_of_both_layouts():
    c = {**MmaGemm.default_config, "BM": 64, "BN": 128, "BK": 32, "STAGES": 3}
    assert MmaGemm.geometry({**c, "SWIZZLE": 1})["smem_bytes"] == 2 * 3 * (64 * 32 + 32 * 128)
    assert MmaGemm.geometry({**c, "SWIZZLE": 0})["smem_bytes"] == 2 * 3 * (64 * 40 + 32 * 136)


def test_a_good_share_of_random_proposals_is_valid(space, h200):
    rng = random.Random(0)
    draws = [random_config(space, rng) for _ in range(2000)]
    valid = sum(not space.violations(c, SHAPE, h200) for c in draws)
    assert valid / len(draws) > 0.2


def test_launch_plan_without_split(space, h200):
    config = {ALGO: "mma", **MmaGemm.default_config, "BM": 64, "BN": 128, "WM": 32, "WN": 64, "SPLIT_K": 1}
    (launch,) = space.launches(config, (1000, 300, 77), h200)
    assert isinstance(launch, Launch) and launch.kernel == "gemm_mma"
    assert launch.grid == (16 * 3, 1, 1)
    assert launch.block == (32 * 2 * 2, 1, 1)
    assert launch.args[:3] == ("A", "B", "C")
    assert [int(a) for a in launch.args[3:]] == [1000, 300, 77]
    assert all(isinstance(a, np.int32) for a in launch.args[3:])
    assert space.workspace(config, (1000, 300, 77)) == {}


def test_split_k_plan_fills_the_gpu_at_127_rows(space, h200):
    shape = (127, 4096, 4096)
    config = {ALGO: "mma", **MmaGemm.default_config, "BM": 128, "BN": 128, "WM": 64, "WN": 64, "SPLIT_K": 4}
    gemm, reduce = space.launches(config, shape, h200)
    assert gemm.grid == (32, 1, 4) and gemm.args[2] == "partial"
    assert gemm.grid[0] * gemm.grid[2] >= 0.9 * h200.multiprocessors
    assert reduce.kernel == "gemm_splitk_reduce" and reduce.args[:2] == ("partial", "C")
    assert int(reduce.args[2]) == 127 * 4096 and reduce.args[2].dtype == np.int64 and int(reduce.args[3]) == 4
    assert reduce.grid[0] * reduce.block[0] <= 127 * 4096 + reduce.block[0]
    (partial,) = space.workspace(config, shape).values()
    assert partial.shape == (4, 127, 4096) and partial.dtype == "float32"


def test_validation_cases_exercise_the_fallback_paths():
    """Ragged against every mma tile; one case with rows not 16-byte aligned in both operands (scalar gather)
    and K no multiple of 16; one with both aligned (cp.async 16 B with zero-filled edges)."""
    space = get_space("gemm", dtype="float16")
    cases = [s for s, _ in space.validation_cases(SHAPE)]
    assert any(n % 8 and k % 8 and k % 16 for _, n, k in cases)
    assert any(n % 8 == 0 and k % 8 == 0 and m % 16 for m, n, k in cases)
    for m, n, _ in cases:
        assert all(m % s for s in space.domain("mma.BM")) or all(n % s for s in space.domain("mma.BN"))


def test_round_trip_through_a_study_and_the_best_table(tmp_path):
    """A mma config → enqueued Optuna trial → asked define-by-run → best-table row → export file → import, per
    dtype: the same configuration comes back, keyed by its dtype (the import checks it against the space)."""
    import optuna
    from typer.testing import CliRunner

    from autotune.cli import app
    from autotune.results.storage import BestEntry, Database, resolve_url

    source = Database(resolve_url(tmp_path / "src.db"))
    configs = {}
    for name in HALF:
        space = get_space("gemm", dtype=name)
        storage = f"sqlite:///{tmp_path / (name + '.db')}"
        study = optuna.create_study(storage=storage, study_name=name)
        config = {ALGO: "mma", **MmaGemm.default_config, "SPLIT_K": 3, "SWIZZLE": 0, "BM": 64}
        study.enqueue_trial(optuna_params(space, config))
        trial = study.ask()
        assert suggest(space, trial) == config
        study.tell(trial, 1.0)
        stored = config_of(space, optuna.load_study(study_name=name, storage=storage).trials[0].params)
        assert config_key(stored) == config_key(config)
        configs[name] = stored
        source.save_best(BestEntry(
            device_name="NVIDIA H100 80GB HBM3", compute_capability="9.0", kernel="gemm", shape="127x4096x4096",
            dtype=name, template_hash=space.template_hash(), params=stored, time_ms=0.1, metric=400.0,
            metric_unit="TFLOP/s", default_time_ms=0.2, driver_version="580", nvcc_version="13.0", study_name=name,
            trial_number=0,
        ))  # fmt: skip
    source.close()
    out = tmp_path / "configs.json"
    runner = CliRunner()
    result = runner.invoke(app, ["export", "--out", str(out), "--db", str(tmp_path / "src.db")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["import", str(out), "--db", str(tmp_path / "dst.db")])
    assert result.exit_code == 0 and "2 added" in result.output, result.output
    target = Database(resolve_url(tmp_path / "dst.db"), create=False)
    for name in HALF:
        (row,) = target.best("gemm", dtype=name)
        assert row.config == configs[name] and row.shape == "127x4096x4096"
    assert target.best("gemm", dtype="float32") == []


def sample_valid(space, device, n, seed, **fixed):
    rng = random.Random(seed)
    seen, out = set(), []
    for _ in range(100000):
        if len(out) == n:
            break
        config = {**random_config(space, rng), **fixed}
        if config_key(config) not in seen and not space.violations(config, SHAPE, device):
            seen.add(config_key(config))
            out.append(config)
    return out


def compile_all(space, configs, cache_dir, arch="sm_90a"):
    compiler = Compiler(arch, cache_dir=cache_dir)
    try:
        futures = [compiler.submit(space.template_for(c), space.defines(c)) for c in configs]
        return [f.result() for f in futures]
    finally:
        compiler.close()


@pytest.mark.nvcc
def test_default_config_issues_hmma_without_spilling(cache_dir, h200):
    space = get_space("gemm", {ALGO: ["mma"]}, dtype="float16")
    default = {ALGO: "mma", **MmaGemm.default_config}
    deeper = {**default, "BK": 64, "STAGES": 3}  # the largest single-set configuration the estimate admits
    assert not space.violations(deeper, SHAPE, h200)
    result, result64 = compile_all(space, [default, deeper], cache_dir)
    assert result.ok, result.error
    assert result.spill_bytes == 0 and result.registers <= 255
    assert result64.ok and result64.spill_bytes == 0, (result64.error, result64.spill_bytes)
    assert {"gemm_mma", "gemm_splitk_reduce"} <= set(result.kernels)
    sass = sass_of(result)
    if sass is not None:
        assert "HMMA.16816.F32" in sass and "LDSM" in sass and "LDGSTS" in sass


def sass_of(result) -> str | None:
    import shutil
    import subprocess

    tool = shutil.which("cuobjdump")
    cubin = getattr(result, "cubin", None) or getattr(result, "path", None)
    if tool is None or cubin is None:
        return None
    return subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True).stdout


@pytest.mark.nvcc
def test_sampled_valid_configs_compile_without_spilling(cache_dir, h200):
    """Random valid configurations of both dtypes (every STAGES, both layouts, split-K among them) compile for
    sm_90a and sm_80, and ptxas spills none of them (the register estimate is conservative enough)."""
    configs = []
    for i, name in enumerate(HALF):
        space = get_space("gemm", {ALGO: ["mma"]}, dtype=name)
        configs += [(space, c) for c in sample_valid(space, h200, 6, seed=10 + i)]
        configs += [(space, c) for s in (2, 5) for c in sample_valid(space, h200, 1, seed=20 + s, STAGES=s)]
    results = []
    for space in {id(s): s for s, _ in configs}.values():
        mine = [c for s, c in configs if s is space]
        results += list(zip(mine, compile_all(space, mine, cache_dir)))
    failed = [(c, r.error) for c, r in results if not r.ok]
    assert not failed, failed[:3]
    spilled = [(MmaGemm.describe(None, c), r.spill_bytes) for c, r in results if r.spill_bytes]
    assert not spilled, spilled
    space80 = get_space("gemm", {ALGO: ["mma"]}, dtype="bfloat16")
    (r80,) = compile_all(space80, [{ALGO: "mma", **MmaGemm.default_config}], cache_dir, arch="sm_80")
    assert r80.ok, r80.error


@pytest.mark.nvcc
def test_template_rejects_what_the_space_rejects(cache_dir, h200):
    """Configurations rejected for their tile geometry or accumulator count fail the template's static_asserts."""
    space = get_space("gemm", {ALGO: ["mma"]}, dtype="float16")
    rng = random.Random(3)
    bad = []
    while len(bad) < 5:
        config = random_config(space, rng)
        problems = space.violations(config, SHAPE, h200)
        if problems and ("split" in problems[0] or "accumulators" in problems[0]):
            bad.append(config)
    results = compile_all(space, bad, cache_dir)
    assert all(not r.ok and "static assertion" in (r.error or "") for r in results), [r.error for r in results]
    fp32 = dict(space.defines({ALGO: "mma", **MmaGemm.default_config}), DTYPE=0)
    compiler = Compiler("sm_90a", cache_dir=cache_dir)
    try:
        r = compiler.compile(space.template_for({ALGO: "mma"}), fp32)
    finally:
        compiler.close()
    assert not r.ok and "static assertion" in (r.error or "")


# --- GPU -------------------------------------------------------------------------------------------------------
RAGGED = [(67, 131, 33), (333, 264, 104), (129, 72, 264), (61, 70, 1000), (1, 8, 16)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF)
def test_random_valid_configs_are_correct_on_ragged_shapes(dtype):
    """The default and random valid configurations (split-K among them) on odd M, N, K; K no multiple of 16;
    rows not 16-byte aligned; uniform and wide-range inputs (the family's validation cases run first)."""
    from autotune.device import query_device
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    device = query_device()
    space = get_space("gemm", dtype=dtype)
    narrow = get_space("gemm", {ALGO: ["mma"]}, dtype=dtype)
    configs = [{ALGO: "mma", **MmaGemm.default_config}]
    configs += sample_valid(narrow, device, 8, seed=7)
    configs += sample_valid(narrow, device, 3, seed=8, SPLIT_K=3)
    configs += sample_valid(narrow, device, 2, seed=9, DOUBLE_FRAGS=1)
    configs += sample_valid(narrow, device, 2, seed=11, SWIZZLE=0)
    for shape in RAGGED:
        with GpuEvaluator(space, shape, seed=5, min_time_ms=0.2, max_reps=3) as evaluator:
            results = [f.result() for f in [evaluator.submit(c) for c in configs]]
        wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
        assert not wrong, (shape, wrong)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF)
def test_split_k_at_127_rows(dtype):
    """127×4096×K with split-K (K kept small for speed, and ragged): the partials and the reduction are right."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space("gemm", dtype=dtype)
    configs = [
        {ALGO: "mma", **MmaGemm.default_config, "BM": 128, "BN": 128, "WM": 64, "WN": 64, "SPLIT_K": s}
        for s in (1, 4, 8)
    ]
    with GpuEvaluator(space, (127, 4096, 1000), seed=3, min_time_ms=0.2, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
