"""Hosts joining a study (`autotune worker`), on replayed measurements: the join logic needs no GPU."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState
from typer.testing import CliRunner

from autotune.cli import app
from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.results.storage import resolve_url
from autotune.spaces import config_key
from autotune.tuning.join import join
from autotune.tuning.tune import tune

from synthetic import make_recording

TESTS = Path(__file__).parent


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "rec.json"
    return path, make_recording(path)


def measured(url: str, name: str) -> list:
    study = optuna.load_study(study_name=name, storage=url)
    return [t for t in study.trials if studies.is_measured(t)]


def test_worker_joins_and_reaches_the_study_target(tmp_path, recording):
    path, _ = recording
    db = str(tmp_path / "s.db")
    first = tune("gemm", trials=10, db=db, replay=str(path), seed=1)
    result = CliRunner().invoke(app, ["worker", first.study_name, "--db", db, "--trials", "25", "--replay", str(path)])
    assert result.exit_code == 0, result.output
    assert first.study_name in result.output
    assert len(measured(resolve_url(db), first.study_name)) == 25
    # Without --trials the worker aims at the study's recorded target (the latest search's --trials): reached.
    report = join(first.study_name, db=db, replay=str(path))
    assert report.measured_now == 0 and report.measured_total == 25


def test_worker_refuses_what_it_cannot_join(tmp_path, recording):
    path, rec = recording
    db = str(tmp_path / "s.db")
    first = tune("gemm", trials=5, db=db, replay=str(path), seed=1)
    runner = CliRunner()
    result = runner.invoke(app, ["worker", "nosuchstudy", "--db", db, "--replay", str(path)])
    assert result.exit_code == 2 and result.output.startswith("error:") and "no study" in result.output
    other_gpu = tmp_path / "h100.json"
    rec.device = dataclasses.replace(rec.device, name="NVIDIA H100 80GB HBM3")
    rec.save(other_gpu)
    result = runner.invoke(app, ["worker", first.study_name, "--db", db, "--replay", str(other_gpu)])
    assert result.exit_code == 2 and "not comparable" in result.output and len(result.output.splitlines()) == 1
    other_template = tmp_path / "edited.json"
    rec = make_recording(tmp_path / "again.json")
    rec.template_hash = "f" * 64
    rec.save(other_template)
    with pytest.raises(InvalidArgument, match="same autotune version"):
        join(first.study_name, db=db, replay=str(other_template))
    result = runner.invoke(app, ["worker", first.study_name, "--db", db, "--wait", "-1"])
    assert result.exit_code == 2 and "--wait must not be negative" in result.output


_HOST = textwrap.dedent(
    """
    import json, sys
    from autotune.tuning.evaluation import RecordedMeasurements, ReplayEvaluator
    from autotune.tuning.join import join
    from autotune.tuning.tune import tune
    role, url, path, name = sys.argv[1:5]
    rec = RecordedMeasurements.load(path)
    evaluator = ReplayEvaluator(rec, delay_s=0.05)  # a GPU's pace, so that both hosts take part
    if role == "search":
        report = tune("gemm", trials=60, db=url, evaluator=evaluator, template_hash=rec.template_hash,
                      domains=rec.domains, shape=rec.shape, seed=1)
    else:
        report = join(name, db=url, evaluator=evaluator, wait_s=120, seed=2)
    assert report.study_name == name, (report.study_name, name)
    print(json.dumps({"measured_now": report.measured_now, "total": report.measured_total}))
    """
)


def test_two_hosts_share_one_postgresql_study(tmp_path, recording):
    url = os.environ.get("AUTOTUNE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("no PostgreSQL server: .ci/run starts one and sets AUTOTUNE_TEST_POSTGRES_URL")
    url = resolve_url(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # a clean database for this run
        conn.execute(sa.text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    path, rec = recording
    name = studies.study_name("gemm", "x".join(map(str, rec.shape)), "float32", rec.device, rec.template_hash)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), str(TESTS)]))
    # The joining host starts first and waits for the study that the searching host creates.
    hosts = [
        subprocess.Popen([sys.executable, "-c", _HOST, role, url, str(path), name], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for role in ("worker", "search")
    ]  # fmt: skip
    outputs = [h.communicate(timeout=600) for h in hosts]
    for host, (out, err) in zip(hosts, outputs):
        assert host.returncode == 0, err[-2000:]
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert all(r["measured_now"] > 0 for r in reports), f"both hosts measured: {reports}"
    study = optuna.load_study(study_name=name, storage=url)
    count = sum(studies.is_measured(t) for t in study.trials)
    assert count == 60, count  # the hosts claim what they measure, no more than the target (`autotune.tuning.claims`)
    keys = [config_key(t.params) for t in study.trials if studies.is_measured(t)]
    assert len(keys) == len(set(keys)), "no configuration measured by both hosts"
    assert sum(r["measured_now"] for r in reports) == count
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]


def test_a_joining_host_waits_for_the_target_written_after_the_study(tmp_path, recording):
    # A search writes the study's attributes one at a time and the target last; a host that saw the study
    # before the target (the race CI once hit on PostgreSQL) waits for it instead of giving up.
    path, _ = recording
    db = str(tmp_path / "s.db")
    url = resolve_url(db)
    first = tune("gemm", trials=5, db=db, replay=str(path), seed=1)
    attrs = optuna.load_study(study_name=first.study_name, storage=url).user_attrs
    late = optuna.create_study(study_name="late", storage=url)
    for key, value in attrs.items():
        if key != studies.TARGET:
            late.set_user_attr(key, value)
    writer = threading.Timer(1.0, late.set_user_attr, (studies.TARGET, 8))
    writer.start()
    try:
        report = join("late", db=db, replay=str(path), wait_s=30)
    finally:
        writer.join()
    assert report.measured_total == 8
    bare = optuna.create_study(study_name="no-target", storage=url)
    for key, value in attrs.items():
        if key != studies.TARGET:
            bare.set_user_attr(key, value)
    with pytest.raises(InvalidArgument, match="give --trials"):  # a target never written: said after the wait
        join("no-target", db=db, replay=str(path), wait_s=0.2)
    optuna.create_study(study_name="foreign", storage=url)
    with pytest.raises(InvalidArgument, match="not made by an autotune search"):
        join("foreign", db=db, replay=str(path))
