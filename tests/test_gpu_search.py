"""GPU tier: whole searches, with real candidates and with injected faults."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState
from typer.testing import CliRunner

from autotune.cli import app
from autotune.results import studies
from autotune.results.storage import Database, resolve_url
from autotune.tuning.tune import tune

from faults.space import EXPECTED_FAILURE, FAULTS

pytestmark = pytest.mark.gpu


def test_fifty_trial_search_end_to_end(tmp_path):
    from autotune.device import query_device

    db = tmp_path / "s.db"
    report = tune("gemm", "2048x2048x2048", trials=50, db=str(db), seed=1)
    assert report.measured_total == 50 == report.measured_now
    # Our template is correct in every valid configuration: no candidate may fail validation or fault.
    bad = {k: n for k, n in report.failures.items() if k in ("wrong", "nan", "crash", "timeout", "worker")}
    assert not bad, report.failure_examples
    assert report.best is not None and report.best.metric > 1.0
    # Re-timed with the leaders where within twice the fastest; beyond, its search time stands (slower anyway).
    assert report.default is not None and report.speedup >= 1.0 - 0.05
    (row,) = Database(resolve_url(db), create=False).best("gemm")
    assert row.config == report.best.config and row.device_name == query_device().name
    study = optuna.load_study(study_name=report.study_name, storage=resolve_url(db))
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]


def test_faulty_candidates_do_not_stop_a_search(tmp_path):
    """Crashing, hanging, wrong, NaN, uncompilable and unlaunchable candidates: each is a failed trial with its
    reason, the worker is restarted after crashes and hangs, the good candidates are measured, and the winner
    is a good one."""
    db = tmp_path / "f.db"
    n = 60  # of 7 faults x 3 tiles x 3 unroll factors: every kind of fault, several times, among good ones
    report = tune("faults.space:FaultyGemmSpace", trials=n, db=str(db), sampler="grid", timeout_s=3, seed=1)
    assert report.measured_total == n
    study = optuna.load_study(study_name=report.study_name, storage=resolve_url(db))
    measured = [t for t in study.trials if studies.is_measured(t)]
    assert len(measured) == n
    for t in measured:
        fault = t.params["FAULT"]
        if fault == "none":
            assert t.state == TrialState.COMPLETE and t.value > 0
        else:
            assert t.state == TrialState.FAIL, t.params
            assert t.user_attrs[studies.FAILURE] == EXPECTED_FAILURE[fault], (t.params, t.user_attrs)
            assert t.user_attrs[studies.REASON]
    assert report.best.config["FAULT"] == "none"
    kinds = {t.params["FAULT"] for t in measured}
    assert kinds == set(FAULTS), "every fault was met"
    crashes_and_hangs = sum(t.params["FAULT"] in ("crash", "hang") for t in measured)
    assert report.restarts >= crashes_and_hangs >= 6, "each crash and each hang restarts the worker"
    assert study.user_attrs["worker_restarts"] == report.restarts, "the study summary counts the restarts"


def test_cli_search_and_best(tmp_path):
    db = str(tmp_path / "c.db")
    runner = CliRunner()
    result = runner.invoke(app, ["search", "gemm", "--trials", "12", "--shape", "512x384x256", "--db", db])
    assert result.exit_code == 0, result.output
    assert "best" in result.output and "TFLOP/s" in result.output
    listed = runner.invoke(app, ["best", "gemm", "--db", db])
    assert listed.exit_code == 0 and "512x384x256" in listed.output


def test_a_candidate_over_the_race_line_is_validated_then_timed_twice(tmp_path):
    """Racing (autotune/tuning/evaluation/racing.py) on the worker: under a line no kernel can meet, a good
    candidate is still validated, then timed by two runs (`raced`); a wrong one still fails as wrong; without
    racing the same candidate gets its full count of repetitions."""
    from faults.space import FaultyGemmSpace

    from autotune.tuning.evaluation.base import Measurement, Timing
    from autotune.tuning.evaluation.gpu import GpuEvaluator
    from autotune.tuning.evaluation.racing import RaceLine

    space = FaultyGemmSpace()
    line = RaceLine()
    line.offer(Measurement(ok=True, timing=Timing.of([1e-6])))  # the line: 2 ns
    good = dict(space.default_config, FAULT="none")
    wrong = dict(space.default_config, FAULT="wrong_odd_m")
    with GpuEvaluator(space, space.default_shape, race_line=line, cache_dir=tmp_path) as evaluator:
        raced = evaluator.submit(good).result()
        failed = evaluator.submit(wrong).result()
    assert raced.ok and raced.raced and raced.timing.reps == 2 and raced.max_rel_error is not None
    assert not failed.ok and failed.failure == "wrong"
    with GpuEvaluator(space, space.default_shape, racing=False, cache_dir=tmp_path) as evaluator:
        full = evaluator.submit(good).result()
    assert full.ok and not full.raced and full.timing.reps >= 5


def test_a_handed_on_worker_measures_the_next_shape(tmp_path):
    """The buckets of a range share one GPU worker: the second search starts no process (its start-up beside the
    first compiles has no worker phase) and measures as the first did."""
    from autotune.tuning.evaluation.gpu import WorkerHandoff

    handoff = WorkerHandoff()
    try:
        reports = [tune("gemm", shape, trials=8, db=str(tmp_path / "h.db"), seed=0, handoff=handoff)
                   for shape in ("256x256x256", "512x256x256")]  # fmt: skip
    finally:
        handoff.close()
    for report in reports:
        assert report.measured_total == 8 and report.best is not None, report.failure_examples
        assert not {k for k in report.failures if k in ("wrong", "crash", "timeout", "worker")}, report.failures
    assert "worker" in reports[0].profile.beside and "worker" not in reports[1].profile.beside
    assert set(reports[1].profile.beside) == {"build", "setup"} and set(reports[0].profile.startup) == {"device"}
