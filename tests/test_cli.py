"""The command line through typer's CliRunner: a replayed search, the listing, and bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autotune.cli import app

from conftest import file_digest

RECORDING = Path(__file__).parent / "data" / "replay_gemm_h200.json"


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def stored_db(tmp_path, runner):
    """A database holding one replayed study and its best configuration."""
    db = tmp_path / "studies.db"
    result = runner.invoke(app, ["search", "gemm", "--trials", "25", "--replay", str(RECORDING), "--db", str(db),
                                 "--seed", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    return db


def test_replayed_search_prints_the_leaders(stored_db, runner):
    result = runner.invoke(app, ["search", "gemm", "--trials", "30", "--replay", str(RECORDING), "--db",
                                 str(stored_db), "--seed", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    assert "gemm-1024x1024x1024-f32-nvidia-h200-" in out
    assert "measured 30 of 30 (5 this run)" in out, "the second run resumes the first"
    assert "the default configuration" in out and "TFLOP/s" in out


def test_best_lists_the_stored_configuration(stored_db, runner):
    result = runner.invoke(app, ["best", "gemm", "--db", str(stored_db)])
    assert result.exit_code == 0, result.output
    assert "1024x1024x1024" in result.output and "NVIDIA H200" in result.output
    data = json.loads(runner.invoke(app, ["best", "--json", "--db", str(stored_db)]).output)
    assert len(data) == 1
    row = data[0]
    assert row["kernel"] == "gemm" and row["shape"] == "1024x1024x1024" and row["metric_unit"] == "TFLOP/s"
    assert set(row["params"]) >= {"BM", "BN", "BK", "PIPELINE"}
    from autotune.evaluation import Recording
    from autotune.spaces import get_space

    recorded_with = Recording.load(RECORDING).template_hash
    assert row["template_hash"] == recorded_with
    current = get_space("gemm").template_hash()
    assert row["stale"] is (recorded_with != current), "stale exactly when the template changed"
    empty = runner.invoke(app, ["best", "softmax", "--db", str(stored_db)])
    assert empty.exit_code == 0 and "no tuned configurations stored for softmax" in empty.output
    unknown = runner.invoke(app, ["best", "fft", "--db", str(stored_db)])
    assert unknown.exit_code == 2 and "unknown kernel" in unknown.output


def _bad_invocations(tmp_path: Path, stored: Path) -> list[tuple[list[str], str]]:
    notdb = tmp_path / "notes.db"
    notdb.write_text("not a database")
    replay = ["--replay", str(RECORDING)]
    return [
        (["search", "nosuchkernel"], "unknown kernel"),
        (["search", "gemm", "--shape", "4096x"], "malformed shape"),
        (["search", "gemm", "--shape", "-1x2x3"], "must be a positive integer"),
        (["search", "gemm", "--shape", "0x1x1"], "must be a positive integer"),
        (["search", "gemm", "--shape", "abc"], "malformed shape"),
        (["search", "gemm", "--shape", "1x2x3x4"], "malformed shape"),
        (["search", "gemm", "--trials", "0", "--db", str(stored)], "--trials must be at least 1"),
        (["search", "gemm", "--trials", "-5", "--db", str(stored)], "--trials must be at least 1"),
        (["search", "gemm", "--trials", "many"], "Invalid value"),
        (["search", "gemm", "--sampler", "annealing", "--db", str(stored)], "unknown sampler"),
        (["search", "gemm", "--timeout", "0", "--db", str(stored), *replay], "--timeout must be positive"),
        (["search", "gemm", "--db", str(tmp_path / "missing" / "x.db"), *replay], "does not exist"),
        (["search", "gemm", "--db", str(notdb), *replay], "not an SQLite database"),
        (["search", "gemm", "--db", "nosuchdialect://x/y", *replay], "no such database kind"),
        (["search", "gemm", "--replay", str(tmp_path / "none.json"), "--db", str(stored)], "cannot read replay"),
        (["search", "gemm", "--shape", "64x64x64", "--db", str(stored), *replay], "recorded at"),
        (["search", "gemm", "--no-such-option"], "No such option"),
        (["best", "--db", str(tmp_path / "absent.db")], "does not exist"),
        (["best", "--db", str(notdb)], "not an SQLite database"),
        (["best", "nosuchkernel", "--db", str(stored)], "unknown kernel"),
        (["nosuchcommand"], "No such command"),
    ]


def test_bad_input_is_one_line_and_changes_nothing(tmp_path, stored_db, runner):
    before = file_digest(stored_db)
    for args, message in _bad_invocations(tmp_path, stored_db):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.exit_code, result.output)
        text = result.output.strip()
        assert message in text, (args, text)
        assert len(text.splitlines()) == 1 and text.startswith("error:"), (args, text)
        assert "Traceback" not in text
        assert file_digest(stored_db) == before, args
    assert not (tmp_path / "missing").exists()


def test_no_nvcc_and_no_gpu_are_one_line(tmp_path, runner, monkeypatch):
    db = tmp_path / "x.db"
    monkeypatch.setenv("AUTOTUNE_NVCC", "/nonexistent/nvcc")
    result = runner.invoke(app, ["search", "gemm", "--db", str(db)])
    assert result.exit_code == 2 and "AUTOTUNE_NVCC" in result.output
    assert not db.exists()
    monkeypatch.delenv("AUTOTUNE_NVCC")
    if os.environ.get("AUTOTUNE_TEST_HAS_GPU"):
        return
    from conftest import gpu_problem, nvcc_problem

    if gpu_problem() and not nvcc_problem():  # a machine without a GPU: the worker says so in one line
        result = runner.invoke(app, ["search", "gemm", "--db", str(db)])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("error:") and len(result.output.strip().splitlines()) == 1
        assert "pycuda" in result.output or "GPU" in result.output
        assert not db.exists(), "nothing is created when there is no GPU"


def test_reading_commands_leave_an_optuna_file_untouched(tmp_path, runner):
    """`studies`, `show` and `export` on a file made by Optuna alone: same bytes, no -wal/-shm, and export
    writes an empty list (there is no tuned configuration) instead of failing."""
    from test_storage import optuna_only_database

    path = tmp_path / "plain.db"
    optuna_only_database(path)
    before = file_digest(path)
    for args in (["studies"], ["studies", "--json"], ["show", "plain"], ["show", "plain", "--json"]):
        result = runner.invoke(app, [*args, "--db", str(path)])
        assert result.exit_code == 0, (args, result.output)
    out = tmp_path / "configs.json"
    result = runner.invoke(app, ["export", "--out", str(out), "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["devices"] == []
    assert "exported 0 configurations" in result.output
    assert file_digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs.json", "plain.db"]
