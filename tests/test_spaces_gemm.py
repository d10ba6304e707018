"""The gemm family: algorithms as a conditional dimension, dtypes, inputs, references and the accuracy contract."""

import dataclasses
import random

import numpy as np
import optuna
import pytest

from autotune import dtypes
from autotune.errors import InvalidArgument
from autotune.spaces import ALGO, config_key, enumeration, get_space, kernel_names
from autotune.spaces.gemm import FP32_FLOOR, HALF_TOLERANCE, WIDE
from autotune.spaces.optuna_mapping import config_of, optuna_params, suggest

from conftest import H200

SHAPE = (4096, 4096, 4096)
DTYPES = get_space("gemm").supported_dtypes()
HALF = [d for d in DTYPES if d != "float32"]


def test_registered():
    assert "gemm" in kernel_names()


def test_algo_is_the_first_parameter_and_others_are_conditional():
    space = get_space("gemm")
    assert space.params[0].name == ALGO
    assert all(p.algorithm in space.params[0].values for p in space.params[1:])
    assert space.default_config[ALGO] == space.params[0].values[0]


def test_each_dtype_offers_only_its_algorithms():
    for name in DTYPES:
        space = get_space("gemm", dtype=name)
        for algo in space.domain(ALGO):
            assert name in space.algos[algo].dtypes
    with pytest.raises(InvalidArgument, match="does not support dtype float64"):
        get_space("gemm", dtype="float64")
    with pytest.raises(InvalidArgument, match="does not support dtype int8; it supports float32"):
        get_space("gemm", dtype="int8")


def test_random_configs_hold_their_algorithms_parameters_only(h200):
    space = get_space("gemm")
    rng = random.Random(0)
    for _ in range(200):
        config = enumeration.random_config(space, rng)
        names = {p.name for p in space.active_params(config)}
        assert set(config) == names
        assert not any("missing" in p or "unknown" in p for p in space.violations(config, SHAPE, h200))


def test_configs_enumerate_algorithm_by_algorithm():
    space = get_space("gemm", {"ALGO": ["simt"], "BM": [64], "BN": [64], "BK": [8], "TM": [4], "TN": [4]})
    configs = list(enumeration.configs(space))
    assert len(configs) == enumeration.size(space)
    assert all(c[ALGO] == "simt" for c in configs)


def test_optuna_round_trip_of_a_conditional_config(tmp_path):
    """A config → enqueued trial → asked define-by-run → config again, through an RDB study."""
    space = get_space("gemm")
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(storage=storage, study_name="x")
    rng = random.Random(1)
    configs = [enumeration.random_config(space, rng) for _ in range(5)]
    for config in configs:
        study.enqueue_trial(optuna_params(space, config))
    for config in configs:
        trial = study.ask()
        asked = suggest(space, trial)
        assert asked == config
        study.tell(trial, 1.0)
    stored = [config_of(space, t.params) for t in optuna.load_study(study_name="x", storage=storage).trials]
    assert [config_key(c) for c in stored] == [config_key(c) for c in configs]


def test_inputs_are_rounded_to_the_dtype_and_the_reference_uses_their_exact_values():
    for name in DTYPES:
        space = get_space("gemm", dtype=name)
        rng = np.random.default_rng(0)
        shape = (5, 7, 3)
        inputs = space.inputs(shape, rng)
        assert inputs["A"].dtype == np.dtype(dtypes.dtype(name).host) and inputs["A"].shape == (5, 3)
        decoded = space.decoded_inputs(inputs, shape)
        assert np.all(decoded["A"] != 0)
        ref = space.reference(decoded, shape)["C"]
        assert ref.dtype == np.float64
        assert np.array_equal(ref, decoded["A"] @ decoded["B"])
        assert space.outputs(shape)["C"].dtype == name


def test_wide_inputs_span_the_range():
    space = get_space("gemm")
    inputs = space.decoded_inputs(space.inputs((64, 64, 8), np.random.default_rng(0), WIDE), (64, 64, 8))
    row_scale = np.abs(inputs["A"]).max(axis=1)
    assert row_scale.max() / row_scale.min() > 2.0**20
    for name in HALF:
        half = get_space("gemm", dtype=name)
        wide = half.decoded_inputs(half.inputs((64, 64, 8), np.random.default_rng(0), WIDE), (64, 64, 8))
        assert np.isfinite(wide["A"]).all() and np.all(wide["A"] != 0)


def test_validation_covers_ragged_shapes_wide_inputs_and_long_k():
    cases = get_space("gemm").validation_cases(SHAPE)
    assert any(kind == WIDE and k >= 16384 for (_, _, k), kind in cases)
    assert any(m % 2 and n % 2 and k % 8 for (m, n, k), _ in cases), "odd M, N; K no multiple of any mma K"


def sequential_fp32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C = A·B accumulated along K in fp32, one k at a time (what an FFMA kernel does, less the fused rounding)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    for k in range(a.shape[1]):
        acc += np.outer(a32[:, k], b32[k])
    return acc.astype(np.float64)


def test_fp32_tolerance_is_tied_to_the_simt_kernels_error_and_excludes_tf32():
    space = get_space("gemm")
    baseline = space.baseline_config()
    assert baseline[ALGO] == "simt" and not space.violations(baseline, SHAPE, H200)
    shape = (24, 20, 2048)
    decoded = space.decoded_inputs(space.inputs(shape, np.random.default_rng(3), WIDE), shape)
    ref = space.reference(decoded, shape)["C"]
    simt_error = np.linalg.norm(sequential_fp32(decoded["A"], decoded["B"]) - ref) / np.linalg.norm(ref)
    tol = space.baseline_tolerance("C", simt_error, shape)
    assert tol == max(2 * simt_error, FP32_FLOOR)
    # One TF32 pass (10 explicit significand bits, truncated here) lands far above it.
    tf32 = {n: (decoded[n].astype(np.float32).view(np.uint32) & 0xFFFFE000).view(np.float32) for n in ("A", "B")}
    err_tf32 = np.linalg.norm(tf32["A"].astype(np.float64) @ tf32["B"] - ref) / np.linalg.norm(ref)
    assert err_tf32 > 20 * tol
    with pytest.raises(ValueError, match="baseline is broken"):
        space.baseline_tolerance("C", 3e-4, shape)
    for name in HALF:
        assert get_space("gemm", dtype=name).baseline_config() is None


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_half_tolerance_separates_fp32_from_half_accumulation(name):
    """Rounding an exact product to the output dtype passes; accumulating in the half type (K = 16384) fails."""
    if True:
        space = get_space("gemm")
        space.dtype = name  # the tolerance rule alone, whether or not an algorithm answers this dtype yet
        shape = (16, 16, 16384)
        decoded = space.decoded_inputs(space.inputs(shape, np.random.default_rng(1)), shape)
        ref = space.reference(decoded, shape)["C"]
        tol = space.tolerances(decoded, {"C": ref}, shape)["C"]
        assert tol == HALF_TOLERANCE[name]
        rounded = dtypes.round_to(ref, name)
        assert np.linalg.norm(rounded - ref) / np.linalg.norm(ref) < tol / 2
        acc = np.zeros((16, 16))
        for k in range(0, shape[2], 64):  # half accumulation, in chunks of 64 (as an mma with half C would)
            acc = dtypes.round_to(acc + decoded["A"][:, k : k + 64] @ decoded["B"][k : k + 64], name)
        assert np.linalg.norm(acc - ref) / np.linalg.norm(ref) > tol


def test_algorithm_needing_a_newer_gpu_is_rejected(h200):
    space = get_space("gemm")
    for algo in space.domain(ALGO):
        need = space.algos[algo].min_cc
        if need > (0, 0):
            older = dataclasses.replace(h200, compute_capability=(need[0] - 1, 5))
            config = {ALGO: algo, **space.algos[algo].default_config}
            assert "needs compute capability" in space.violations(config, SHAPE, older)[0]


def test_mixed_and_unsupported_dtypes_are_named():
    cls = type(get_space("gemm"))
    for name in DTYPES:
        assert cls.infer_dtype({"A": name, "B": name}) == name
    if "float16" in DTYPES:
        with pytest.raises(TypeError, match="B has dtype float32 but A has float16"):
            cls.infer_dtype({"A": "float16", "B": "float32"})
    with pytest.raises(TypeError, match="A has dtype float64; gemm supports"):
        cls.infer_dtype({"A": "float64", "B": "float32"})
    with pytest.raises(TypeError, match="A has dtype int8"):
        cls.infer_dtype({"A": "int8", "B": "int8"})


def test_metric():
    assert get_space("gemm").metric(SHAPE, 1.0) == pytest.approx(2 * 4096**3 / 1e-3 / 1e12)
