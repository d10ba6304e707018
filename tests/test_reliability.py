"""Reliability: interruption and resume, concurrent writers, bad input, schema evolution.

Searches run in child processes on the replay evaluator (real H200 measurements, a simulated GPU delay), so
they can be killed at random points like a real one (`processes`).
"""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState
from typer.testing import CliRunner

import autotune
from autotune.cli import app
from autotune.errors import AutotuneError, InvalidArgument, InvalidConfig, StorageError, UnknownKernel
from autotune.results import studies
from autotune.results.storage import SCHEMA_VERSION, Database, resolve_url
from autotune.spaces import get_space
from autotune.spaces.optuna_mapping import config_of

from conftest import DATA, file_digest
from processes import clean_postgres, finish, measured, measured_now, only_study, paused, repeated, start_search

RECORDING = DATA / "replay_gemm_h200.json"


def test_sigint_and_sigkill_at_random_points_lose_nothing(tmp_path):
    db = str(tmp_path / "r.db")
    target = 60
    rng = random.Random(2026)
    history: list[dict[int, tuple]] = []
    kills = [signal.SIGINT, signal.SIGKILL, signal.SIGKILL, signal.SIGINT, signal.SIGKILL]
    for i, sig in enumerate(kills):
        before = len(history[-1]) if history else 0
        # Paused before the candidate that could complete the study: the kill lands mid-search, however loaded
        # the machine (the search cannot end first).
        proc = start_search(tmp_path, RECORDING, db, target, seed=i, pause_after=max(0, target - before - 1))
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and measured_now(db) <= before:
            if paused(tmp_path, proc):
                break
            time.sleep(0.05)  # until this run has measured something (or paused): the kill then lands mid-search
        time.sleep(rng.uniform(0.0, 0.5))  # at a random point of it
        assert proc.poll() is None, "the search is still running when the signal is sent"
        proc.send_signal(sig)
        finish(proc, 120)
        if Path(db).exists():
            history.append(measured(only_study(db)))
    assert history and all(0 < len(h) < target for h in history), "every kill landed in the middle of a search"
    time.sleep(4.5)  # the grace period of the last killed process's heartbeats (4 x 1 s)
    proc = start_search(tmp_path, RECORDING, db, target, seed=99)
    out, err = finish(proc, 300)
    assert proc.returncode == 0 and "done" in out, err[-2000:]

    study = only_study(db)
    final = measured(study)
    assert len(final) == target, "the study completes to the requested number of measured trials"
    for earlier in history:  # nothing completed before a kill is lost or changed
        for number, entry in earlier.items():
            assert final.get(number) == entry
    keys = [key for key, _, _ in final.values()]
    assert len(keys) == len(set(keys)), "no configuration measured twice"
    assert not [t for t in study.trials if t.state == TrialState.RUNNING], "no trial stays RUNNING"
    (row,) = Database(resolve_url(db), create=False).best("gemm")
    winner = study.trials[row.trial_number]
    assert studies.is_measured(winner) and winner.state == TrialState.COMPLETE
    assert config_of(get_space(row.kernel), winner.params) == row.config


def _concurrency(tmp_path: Path, db: str) -> None:
    from synthetic import make_recording

    other = tmp_path / "other.json"
    third = tmp_path / "third.json"
    make_recording(other, shape=(2048, 2048, 2048))
    make_recording(third, shape=(512, 512, 512))
    runs = [(RECORDING, 80), (RECORDING, 80), (other, 40), (third, 40)]
    procs = [start_search(tmp_path, rec, db, trials, seed=i, delay=0.005) for i, (rec, trials) in enumerate(runs)]
    outputs = [finish(p, 600) for p in procs]
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
        assert "database is locked" not in err
    storage = resolve_url(db)
    summaries = optuna.get_all_study_summaries(storage)
    assert len(summaries) == 3
    rows = Database(storage, create=False).best("gemm")
    assert len(rows) == 3
    for summary in summaries:
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        count = len(measured(study))
        target = 80 if summary.study_name.startswith("gemm-1024x") else 40
        # Two processes on one study claim each configuration they measure, and no more than the target
        # (`autotune.tuning.claims`): each stops once the study holds the target.
        assert count == target, (summary.study_name, count)
        assert repeated(study) == 0, (summary.study_name, "a configuration measured twice")
        assert not [t for t in study.trials if t.state == TrialState.RUNNING]
        (row,) = [r for r in rows if r.study_name == summary.study_name]
        winner = study.trials[row.trial_number]
        assert winner.state == TrialState.COMPLETE
        assert config_of(get_space(row.kernel), winner.params) == row.config


def test_four_processes_share_one_sqlite_database(tmp_path):
    _concurrency(tmp_path, str(tmp_path / "shared.db"))


def test_four_processes_share_one_postgresql_database(tmp_path):
    _concurrency(tmp_path, clean_postgres())


# --- bad input: the CLI and the Python API --------------------------------------------------------------------
def _api_cases(tmp_path: Path, db: str) -> list:
    return [
        (lambda: autotune.tune("nosuchkernel", db=db), UnknownKernel, "unknown kernel"),
        (lambda: autotune.tune("gemm", "4096x", db=db), InvalidArgument, "malformed shape"),
        (lambda: autotune.tune("gemm", "-1x2x3", db=db), InvalidArgument, "positive"),
        (lambda: autotune.tune("gemm", trials=0, db=db), InvalidArgument, "--trials"),
        (lambda: autotune.tune("gemm", sampler="annealing", db=db), InvalidArgument, "unknown sampler"),
        (lambda: autotune.tune("gemm", db=str(tmp_path / "no" / "x.db"), replay=str(RECORDING)), StorageError,
         "does not exist"),
        (lambda: autotune.tune("gemm", db=db, replay=str(tmp_path / "none.json")), InvalidArgument,
         "cannot read replay"),
        (lambda: autotune.get_space("gemm", {"BM": [96]}), InvalidArgument, "outside its domain"),
        (lambda: autotune.get_space("gemm").require_valid({"BM": 1}, (1, 1, 1), None), InvalidConfig, "invalid"),
    ]  # fmt: skip


def test_bad_input_table_cli_and_api(tmp_path, monkeypatch):
    db = tmp_path / "keep.db"
    result = CliRunner().invoke(app, ["search", "gemm", "--trials", "10", "--replay", str(RECORDING), "--db", str(db)])
    assert result.exit_code == 0
    before = file_digest(db)
    newer = tmp_path / "newer.db"
    shutil.copy(db, newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE autotune_meta SET value = '99' WHERE key = 'schema_version'")
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(db.read_bytes()[:3000])
    notdb = tmp_path / "notes.db"
    notdb.write_text("not a database")
    replay = ["--replay", str(RECORDING)]
    cli = [
        (["search", "gemm", "--db", str(newer), *replay], "newer autotune", newer),
        (["search", "gemm", "--db", str(truncated), *replay], "", truncated),
        (["best", "--db", str(truncated)], "", truncated),
        (["search", "gemm", "--db", str(notdb), *replay], "not an SQLite database", notdb),
        (["search", "gemm", "--shape", "4096x", "--db", str(db)], "malformed shape", db),
        (["search", "gemm", "--shape", "0x1x1", "--db", str(db)], "positive integer", db),
        (["search", "gemm", "--shape", "abc", "--db", str(db)], "malformed shape", db),
        (["search", "gemm", "--trials", "0", "--db", str(db)], "--trials", db),
        (["search", "gemm", "--sampler", "annealing", "--db", str(db)], "unknown sampler", db),
        (["search", "nosuchkernel", "--db", str(db)], "unknown kernel", db),
        (["import", str(notdb), "--db", str(db)], "is not JSON", db),
        (["export", "--out", str(tmp_path / "no" / "x.json"), "--db", str(db)], "does not exist", db),
    ]
    digests = {p: file_digest(p) for _, _, p in cli}
    for args, message, path in cli:
        result = CliRunner().invoke(app, args)
        text = result.output.strip()
        assert result.exit_code == 2, (args, text)
        assert text.startswith("error:") and len(text.splitlines()) == 1 and message in text, (args, text)
        assert file_digest(path) == digests[path], args
    monkeypatch.setenv("AUTOTUNE_NVCC", "/nonexistent/nvcc")
    result = CliRunner().invoke(app, ["search", "gemm", "--db", str(db)])
    assert result.exit_code == 2 and "AUTOTUNE_NVCC" in result.output
    monkeypatch.delenv("AUTOTUNE_NVCC")
    for call, error, message in _api_cases(tmp_path, str(db)):
        with pytest.raises(error, match=message) as info:
            call()
        assert isinstance(info.value, AutotuneError) and "\n" not in str(info.value)
    assert file_digest(db) == before, "nothing stored was changed"
    assert len(cli) + 1 + len(_api_cases(tmp_path, str(db))) >= 20


# --- schema evolution -----------------------------------------------------------------------------------------
def test_a_schema_1_database_upgrades_to_claims_and_code_hashes_keeping_every_row(tmp_path):
    db = tmp_path / "v1.db"
    shutil.copy(DATA / "autotune_schema_v1.db", db)
    reader = Database(resolve_url(db), create=False)
    digest = file_digest(db)
    before = {r.shape: r.to_dict() for r in reader.best()}
    assert reader.schema_version() == 1 and file_digest(db) == digest, "a reader changes nothing"
    database = Database(resolve_url(db))
    assert database.schema_version() == SCHEMA_VERSION == 3
    (row,) = database.best("gemm")
    assert row.shape == "1024x1024x1024" and row.config["BM"] in (64, 128)
    assert {r.shape: r.to_dict() for r in database.best()} == before, "every row survives the upgrade"
    with database.engine.connect() as conn:
        assert {"autotune_claims", "autotune_claim_locks", "autotune_code"} <= set(sa.inspect(conn).get_table_names())
    assert database.code_hashes() == {} and reader.code_hashes() == {}  # rows stored before have none
    database.close()
    assert optuna.get_all_study_summaries(resolve_url(db))[0].n_trials > 0, "Optuna's tables are readable"


def test_a_future_migration_upgrades_in_place_without_losing_rows(tmp_path, monkeypatch):
    import autotune.results.storage as storage

    db = tmp_path / "v1.db"
    shutil.copy(DATA / "autotune_schema_v1.db", db)
    before = {r.shape: r.to_dict() for r in Database(resolve_url(db), create=False).best()}

    def add_notes(conn):
        conn.execute(sa.text("ALTER TABLE autotune_best ADD COLUMN notes TEXT DEFAULT ''"))

    monkeypatch.setattr(storage, "SCHEMA_VERSION", 4)
    monkeypatch.setitem(storage.MIGRATIONS, 4, add_notes)
    upgraded = Database(resolve_url(db))
    assert upgraded.schema_version() == 4
    after = {r.shape: r.to_dict() for r in upgraded.best()}
    assert after == before, "every row survives the upgrade"
    with upgraded.engine.connect() as conn:
        assert "notes" in {c["name"] for c in sa.inspect(conn).get_columns("autotune_best")}
    upgraded.close()
    monkeypatch.setattr(storage, "SCHEMA_VERSION", 3)  # the older program refuses the upgraded file, untouched
    digest = file_digest(db)
    with pytest.raises(StorageError, match="newer autotune"):
        Database(resolve_url(db))
    assert file_digest(db) == digest
