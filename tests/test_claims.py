"""autotune.tuning.claims: each configuration of a study measured once, and no more than the target, across
processes."""

from __future__ import annotations

import signal
import time

import optuna
import pytest
import sqlalchemy as sa
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from autotune.results import studies
from autotune.results.storage import Claim as ClaimRow
from autotune.results.storage import Database, resolve_url
from autotune.spaces import config_key, get_space
from autotune.spaces.optuna_mapping import config_of, optuna_params
from autotune.tuning.claims import Claim, Claims
from autotune.tuning.proposals import RepairingSampler, valid_neighbours

from conftest import DATA, H200
from processes import clean_postgres, finish, measured_now, only_study, paused, repeated, start_search
from synthetic import DOMAINS, SHAPE

RECORDING = DATA / "replay_gemm_h200.json"  # 424 configurations measured on an H200


def claims_of(db: Database, study: str) -> dict[str, int]:
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(ClaimRow.config_key, ClaimRow.trial_number).where(ClaimRow.study_name == study))
        return dict(rows.all())


def test_a_configuration_is_claimed_by_one_trial_and_the_target_counts_every_process(tmp_path):
    url = resolve_url(tmp_path / "c.db")
    one, two = Database(url), Database(url)  # two processes
    a, b = Claims(one.engine, "s", target=3), Claims(two.engine, "s", target=3)
    assert a.take("K", 0) is Claim.TAKEN and a.take("K", 0) is Claim.TAKEN  # again: its own
    assert b.take("K", 1) is Claim.HELD and "K" in b.elsewhere
    assert b.take("K", 0) is Claim.TWICE, "the same trial, taken by both processes (an enqueued one)"
    assert b.take("L", 1) is Claim.TAKEN and a.take("M", 2) is Claim.TAKEN
    assert not a.room() and b.take("N", 3) is Claim.FULL, "three claims in two processes: the target"
    assert Claims(one.engine, "other", target=3).take("K", 0) is Claim.TAKEN, "claims are per study"
    b.release(1)
    assert a.room() and b.take("N", 3) is Claim.TAKEN
    assert a.take("M2", 2) is Claim.TAKEN, "a trial that moves to another configuration gives up the first"
    assert claims_of(one, "s") == {"K": 0, "N": 3, "M2": 2}
    a.release(7)  # not a trial of this process: nothing
    assert len(claims_of(one, "s")) == 3


def _trial(number_params: dict, state: TrialState, outcome: str | None, failure: str | None = None):
    attrs = {} if outcome is None else {studies.OUTCOME: outcome}
    if failure:
        attrs[studies.FAILURE] = failure
    dist = {k: CategoricalDistribution([0, 1, 2, 3, 4, 5]) for k in number_params}
    value = 1.0 if state == TrialState.COMPLETE else None
    return create_trial(state=state, value=value, params=number_params, distributions=dist, user_attrs=attrs)


def test_reconcile_frees_what_ended_unmeasured_and_claims_what_was_measured_before_claims(tmp_path):
    url = resolve_url(tmp_path / "c.db")
    db = Database(url)
    study = optuna.create_study(study_name="s", storage=url)
    trials = [
        _trial({"x": 0}, TrialState.COMPLETE, studies.MEASURED),  # 0: measured, claimed
        _trial({"x": 1}, TrialState.FAIL, studies.INTERRUPTED),  # 1: interrupted: its claim goes
        _trial({"x": 2}, TrialState.FAIL, None),  # 2: failed by the stale sweep (its process died): goes
        _trial({"x": 3}, TrialState.FAIL, studies.MEASURED, "compile"),  # 3: measured, a failure: stays
        _trial({"x": 4}, TrialState.COMPLETE, studies.MEASURED),  # 4: measured before claims: claimed now
        _trial({"x": 5}, TrialState.COMPLETE, studies.MEASURED),  # 5: measured x=5, claimed another: fixed
    ]
    for t in trials:
        study.add_trial(t)
    running = study.ask()  # 6: in flight, its parameters not written yet: its claim stands
    claims = Claims(db.engine, "s", target=10)
    for number, key in [(0, "0"), (1, "1"), (2, "2"), (3, "3"), (5, "9"), (running.number, "6")]:
        assert claims.take(key, number) is Claim.TAKEN
    released = claims.reconcile(study.get_trials(), lambda t: str(t.params["x"]))
    assert released == 3
    assert claims_of(db, "s") == {"0": 0, "3": 3, "4": 4, "5": 5, "6": 6}
    assert claims.take("1", 9) is Claim.TAKEN, "an interrupted trial's configuration is free again"
    assert claims.reconcile(study.get_trials(), lambda t: str(t.params["x"])) == 0, "in line: nothing to do"


def test_a_proposal_another_process_holds_moves_to_the_nearest_it_can_claim():
    space = get_space("gemm", DOMAINS)
    config = dict(space.default_config)
    assert not space.violations(config, SHAPE, H200)
    neighbours = list(valid_neighbours(space, config, SHAPE, H200))
    held = {config_key(config), config_key(neighbours[0])}
    asked = []

    def claim(c, number):
        asked.append((config_key(c), number))
        return Claim.HELD if config_key(c) in held else Claim.TAKEN

    sampler = RepairingSampler(optuna.samplers.RandomSampler(), space, SHAPE, H200, lambda c: False, claim)
    params = optuna_params(space, config)
    repaired = sampler.repair(dict(params), 7)
    assert config_of(space, repaired) == neighbours[1] and sampler.moved == 1
    assert [n for _, n in asked] == [7, 7, 7], "claimed for the proposal's trial, nearest first"
    full = RepairingSampler(optuna.samplers.RandomSampler(), space, SHAPE, H200, lambda c: False,
                            lambda c, n: Claim.FULL)  # fmt: skip
    assert full.repair(dict(params), 8) == params, "the target is claimed: left to the driver to settle"


def _several_processes(tmp_path, db: str, processes: int, target: int) -> None:
    procs = [start_search(tmp_path, RECORDING, db, target, seed=i, delay=0.005) for i in range(processes)]
    outputs = [finish(p, 600) for p in procs]
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    study = only_study(db)
    assert repeated(study) == 0, "no configuration measured twice"
    assert sum(studies.is_measured(t) for t in study.trials) == target, "each process stops at the target"
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_on_one_sqlite_study_measure_each_configuration_once(tmp_path, processes):
    _several_processes(tmp_path, str(tmp_path / "shared.db"), processes, target=100)


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_on_one_postgresql_study_measure_each_configuration_once(tmp_path, processes):
    _several_processes(tmp_path, clean_postgres(), processes, target=100)


def test_a_killed_process_blocks_no_configuration(tmp_path):
    db = str(tmp_path / "k.db")
    target = 40
    killed = start_search(tmp_path, RECORDING, db, target, seed=1, pause_after=10)
    deadline = time.monotonic() + 120
    while not paused(tmp_path, killed) and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert paused(tmp_path, killed), "paused, holding the claim of the candidate it is measuring"
    killed.send_signal(signal.SIGKILL)
    finish(killed, 60)
    left = measured_now(db)
    assert 0 < left < target
    # The next search's claims reach the target with the dead process's; it waits for the stale sweep to fail
    # those trials (4 heartbeats of 1 s), which frees their configurations, and then completes the study.
    survivor = start_search(tmp_path, RECORDING, db, target, seed=2)
    out, err = finish(survivor, 300)
    assert survivor.returncode == 0 and "done" in out, err[-2000:]
    study = only_study(db)
    assert sum(studies.is_measured(t) for t in study.trials) == target and repeated(study) == 0
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    assert len(claims_of(Database(resolve_url(db)), study.study_name)) == target


def test_a_study_measured_before_claims_resumes_to_its_target(tmp_path):
    db = str(tmp_path / "old.db")
    first = start_search(tmp_path, RECORDING, db, 30, seed=1)
    assert finish(first, 300)[0].strip().endswith("done")
    database = Database(resolve_url(db))
    with database.engine.begin() as conn:  # as a study measured by autotune before claims (schema 1) has none
        conn.execute(sa.delete(ClaimRow))
    _several_processes(tmp_path, db, 2, target=70)
    assert len(claims_of(database, only_study(db).study_name)) == 70
