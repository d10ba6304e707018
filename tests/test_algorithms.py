"""Algorithms as a conditional dimension: the search asks ALGO first and only that algorithm's parameters, stores
and resumes such configurations, and dtypes decide which algorithms exist (tests/toy_family.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest

from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.results.storage import Database, resolve_url
from autotune.spaces import ALGO, config_key
from autotune.spaces.enumeration import size, valid_configs
from autotune.spaces.optuna_mapping import config_of
from autotune.tuning.evaluation import ReplayEvaluator
from autotune.tuning.search_report import SearchSettings
from autotune.tuning.tune import tune

from conftest import H200
from toy_family import ToyFamily, make_recording

REF = "toy_family:ToyFamily"


def search(tmp_path, dtype, trials, sampler="tpe", seed=0):
    rec = make_recording(dtype)
    return tune(REF, (1024,), trials=trials, dtype=dtype, db=str(tmp_path / "t.db"), sampler=sampler, seed=seed,
                evaluator=ReplayEvaluator(rec), template_hash=rec.template_hash,
                settings=SearchSettings(trials=trials, patience=2000))  # fmt: skip


def test_dtype_decides_the_algorithms():
    assert ToyFamily(dtype="float32").domain(ALGO) == ("tiled",)
    assert ToyFamily(dtype="float16").domain(ALGO) == ("tiled", "vector")
    assert ToyFamily.supported_dtypes() == ("float32", "float16")
    with pytest.raises(InvalidArgument, match="toy does not support dtype bfloat16"):
        ToyFamily(dtype="bfloat16")


def test_same_parameter_name_in_two_algorithms_keeps_its_own_domain():
    space = ToyFamily(dtype="float16")
    assert space.domain("tiled.TILE") == (16, 32, 64, 128) and space.domain("vector.TILE") == (64, 256)
    assert "is not one of" in space.violations({ALGO: "vector", "TILE": 32, "VEC": 8}, (1024,), H200)[0]
    narrowed = ToyFamily({"vector.TILE": [256]}, dtype="float16")
    assert narrowed.domain("vector.TILE") == (256,) and narrowed.domain("tiled.TILE") == (16, 32, 64, 128)


def test_min_cc_rejects_before_anything_is_compiled():
    space = ToyFamily(dtype="float16")
    ampere = dataclasses.replace(H200, compute_capability=(8, 0))
    problems = space.violations({ALGO: "vector", "TILE": 64, "VEC": 8}, (1024,), ampere)
    assert problems == ["algorithm vector needs compute capability 9.0; NVIDIA H200 has 8.0"]


def test_max_cc_rejects_newer_devices(monkeypatch):
    """Arch-specific code (sm_90a) runs on its own capability alone: a ceiling rejects newer devices too."""
    from toy_family import Vector

    monkeypatch.setattr(Vector, "max_cc", (9, 0))
    space = ToyFamily(dtype="float16")
    config = {ALGO: "vector", "TILE": 64, "VEC": 8}
    blackwell = dataclasses.replace(H200, compute_capability=(10, 0))
    assert space.violations(config, (1024,), blackwell) == [
        "algorithm vector runs on compute capability 9.0 at most; NVIDIA H200 has 10.0"
    ]
    assert space.violations(config, (1024,), H200) == []


def test_search_asks_only_the_proposed_algorithms_parameters(tmp_path):
    report = search(tmp_path, "float16", 12)
    study = optuna.load_study(study_name=report.study_name, storage=resolve_url(tmp_path / "t.db"))
    measured = [t for t in study.trials if studies.is_measured(t)]
    assert len(measured) == 12
    space = ToyFamily(dtype="float16")
    algos = set()
    for t in measured:
        algo = t.params[ALGO]
        algos.add(algo)
        assert set(t.params) == {ALGO} | {f"{algo}.{p.name}" for p in space.algos[algo].parameters}
        assert not space.violations(config_of(space, t.params), (1024,), H200)
    assert algos == {"tiled", "vector"}, "both algorithms explored"
    assert report.best.config[ALGO] == "vector", "the faster algorithm wins"
    (row,) = Database(resolve_url(tmp_path / "t.db"), create=False).best("toy")
    assert row.dtype == "float16" and row.config == report.best.config
    assert set(row.config) == {ALGO, "TILE", "VEC"}
    assert "-f16-" in report.study_name


def test_resume_and_grid_cover_every_valid_configuration_of_every_algorithm(tmp_path):
    space = ToyFamily(dtype="float16")
    valid = {config_key(c) for c in valid_configs(space, (1024,), H200)}
    assert len(valid) == 4 * 3 - 1 + 2 * 3
    first = search(tmp_path, "float16", 5, sampler="grid")
    second = search(tmp_path, "float16", len(valid), sampler="grid")
    assert second.measured_total == len(valid) and second.measured_now == len(valid) - 5
    study = optuna.load_study(study_name=first.study_name, storage=resolve_url(tmp_path / "t.db"))
    seen = {config_key(config_of(space, t.params)) for t in study.trials if studies.is_measured(t)}
    assert seen == valid


def test_narrowing_algo_drops_the_other_algorithms_parameters():
    space = ToyFamily({ALGO: ["vector"]}, dtype="float16")
    assert space.domain(ALGO) == ("vector",)
    assert space.domain("TILE") == (64, 256), "one TILE left: no ambiguity"
    assert {p.key for p in space.params} == {ALGO, "vector.TILE", "vector.VEC"}
    assert space.default_config[ALGO] == "vector" and size(space) == 2 * 3
    # a configuration of a dropped algorithm still renders (a baseline that sets tolerances may be one)
    tiled = {ALGO: "tiled", "TILE": 16, "UNROLL": 1}
    assert Path(space.template_for(tiled)).name == space.algos["tiled"].template
    assert "is not one of" in space.violations(tiled, (1024,), H200)[0]
    with pytest.raises(InvalidArgument, match="outside its domain"):
        ToyFamily({ALGO: ["nope"]}, dtype="float16")
