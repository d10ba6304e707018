"""Proposals: the algorithms a search offers at a shape, and invalid joint proposals repaired to valid ones."""

from __future__ import annotations

import dataclasses
import random
from concurrent.futures import Future

import optuna
import pytest

from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.spaces import config_key, get_space
from autotune.spaces.base import ALGO
from autotune.spaces.enumeration import random_config
from autotune.spaces.optuna_mapping import config_of, optuna_params
from autotune.tuning.evaluation import Measurement, ReplayEvaluator, Timing, Toolchain
from autotune.tuning.evaluation.base import Evaluator
from autotune.tuning.proposals import MAX_CHANGED, RepairingSampler, nearest_valid
from autotune.tuning.tune import tune

from conftest import H200
from synthetic import fake_time, make_recording

SQUARE = (4096, 4096, 4096)


def changed(a: dict, b: dict) -> set[str]:
    return {k for k in a if a[k] != b[k]}


def invalid_configs(space, shape, count, seed=0):
    rng = random.Random(seed)
    found = []
    while len(found) < count:
        config = random_config(space, rng)
        if space.violations(config, shape, H200):
            found.append(config)
    return found


def test_a_square_gemm_is_not_offered_gemv_and_a_row_is():
    space = get_space("gemm")
    assert "gemv" in space.domain(ALGO)
    square = space.for_problem(SQUARE, H200)
    assert "gemv" not in square.domain(ALGO) and "simt" in square.domain(ALGO)
    assert not any(p.algorithm == "gemv" for p in square.params), "gemv's parameters go with it"
    assert space.for_problem((1, 4096, 4096), H200) is space, "every algorithm fits a GEMV: the space itself"


def test_algorithms_below_their_compute_capability_are_not_offered():
    volta = dataclasses.replace(H200, compute_capability=(7, 0))
    space = get_space("gemm", dtype="float16")
    with pytest.raises(InvalidArgument, match="no algorithm of gemm .float16. can compute 4096x4096x4096") as e:
        space.for_problem(SQUARE, volta)
    assert "mma needs compute capability 8.0" in str(e.value) and "gemv computes only" in str(e.value)
    assert space.for_problem((1, 4096, 4096), volta).domain(ALGO) == ("gemv",)


def test_nothing_is_written_when_no_algorithm_fits(tmp_path):
    volta = dataclasses.replace(H200, compute_capability=(7, 0))
    recording = make_recording(tmp_path / "rec.json")
    recording.device = volta
    db = tmp_path / "none.db"
    with pytest.raises(InvalidArgument, match="no algorithm"):
        tune("gemm", "64x64x64", dtype="float16", trials=5, db=str(db), evaluator=ReplayEvaluator(recording),
             template_hash="x")  # fmt: skip
    assert not db.exists()


def test_repairs_are_valid_and_as_near_as_the_nearest_single_change():
    space = get_space("gemm").for_problem(SQUARE, H200)
    repaired = 0
    for config in invalid_configs(space, SQUARE, 60):
        fixed = nearest_valid(space, config, SQUARE, H200)
        if fixed is None:
            continue
        repaired += 1
        assert not space.violations(fixed, SQUARE, H200)
        assert fixed[ALGO] == config[ALGO], "a repair stays within the algorithm"
        moved = changed(config, fixed)
        assert 1 <= len(moved) <= MAX_CHANGED
        if len(moved) == 2:  # then no single change would do
            for p in space.active_params(config):
                if p.name == ALGO:
                    continue
                for value in p.values:
                    assert space.violations({**config, p.name: value}, SQUARE, H200)
    assert repaired >= 40, "most random invalid configurations are one or two changes from a valid one"


def test_the_sampler_repairs_whole_proposals_and_leaves_the_rest():
    space = get_space("gemm").for_problem(SQUARE, H200)
    sampler = RepairingSampler(None, space, SQUARE, H200)
    # One change from valid (its ring does not fit shared memory): what a joint proposal typically misses by.
    config = {ALGO: "wgmma_tf32x3", **space.algos["wgmma_tf32x3"].default_config, "STAGES": 6}
    assert space.violations(config, SQUARE, H200)
    params = optuna_params(space, config)
    fixed = sampler.repair(dict(params))
    assert not space.violations(config_of(space, fixed), SQUARE, H200) and sampler.repaired == 1
    partial = {k: v for k, v in params.items() if not k.endswith(".BM")}
    assert sampler.repair(dict(partial)) == partial, "a parameter still to be sampled: nothing to repair yet"
    valid = optuna_params(space, space.rule_default(SQUARE, H200))
    assert sampler.repair(dict(valid)) == valid and sampler.repaired == 1


class HashTimes(Evaluator):
    """Every configuration of the whole space runs, at once, in a time that is a hash of its key."""

    device = H200
    toolchain = Toolchain(nvcc="13.0.88")

    def submit(self, config):
        future = Future()
        t = fake_time(config_key(config))
        future.set_result(Measurement(ok=True, timing=Timing(t, t, t, t, t, 20), registers=100))
        return future

    def retime(self, configs, rounds):
        return [Timing(*(fake_time(config_key(c)),) * 5, rounds) for c in configs]


def test_a_tpe_search_of_the_whole_space_repairs_instead_of_rejecting(tmp_path):
    report = tune("gemm", "4096x4096x4096", trials=60, db=str(tmp_path / "r.db"), seed=1, sampler="tpe",
                  evaluator=HashTimes(), template_hash="hash-times", warm_start=False)  # fmt: skip
    assert report.measured_now == 60
    assert report.repaired_now > report.rejected_now, "after TPE's random start, invalid proposals are repaired"
    study = optuna.load_study(study_name=report.study_name, storage=f"sqlite:///{tmp_path / 'r.db'}")
    space = get_space("gemm")
    for t in study.trials:
        if studies.is_measured(t):
            assert not space.violations(config_of(space, t.params), SQUARE, H200)


def test_a_proposal_of_a_measured_configuration_moves_to_the_nearest_unmeasured_one():
    space = get_space("gemm").for_problem(SQUARE, H200)
    leader = space.rule_default(SQUARE, H200)
    measured = {config_key(leader)}
    sampler = RepairingSampler(None, space, SQUARE, H200, lambda c: config_key(c) in measured)
    moved = config_of(space, sampler.repair(optuna_params(space, leader)))
    assert config_key(moved) not in measured and not space.violations(moved, SQUARE, H200)
    assert len(changed(leader, moved)) == 1 and sampler.moved == 1 and sampler.repaired == 0
    measured.add(config_key(moved))
    again = config_of(space, sampler.repair(optuna_params(space, leader)))
    assert config_key(again) not in measured, "the next nearest, once the nearest is measured too"


def test_replayed_tpe_measures_no_duplicates_of_a_narrowed_space(tmp_path):
    recording = tmp_path / "rec.json"
    make_recording(recording)
    report = tune("gemm", trials=60, db=str(tmp_path / "d.db"), replay=str(recording), seed=2, sampler="tpe")
    assert report.measured_now == 60 and report.moved_now > 0
    assert report.duplicates_now < report.moved_now
