"""The command line through typer's CliRunner: a replayed search, the listing, and bad input."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autotune.cli import app

from conftest import assert_stopped_only_for_lack_of_gpu, file_digest, has_gpu
from synthetic import record_every_config

RECORDING = Path(__file__).parent / "data" / "replay_gemm_h200.json"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


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


def test_search_prints_the_speedup_over_the_rule_default(tmp_path, runner):
    """Where the shape's rule default (what the dispatcher runs untuned) is not the template's default, the summary
    gives the winner's speedup over it as well."""
    from synthetic import make_recording

    recording = tmp_path / "rec.json"
    make_recording(recording)
    result = runner.invoke(app, ["search", "gemm", "--trials", "40", "--replay", str(recording), "--db",
                                 str(tmp_path / "r.db"), "--seed", "11"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "the rule default for the shape, what runs untuned" in " ".join(result.output.split())


def test_best_lists_the_stored_configuration(stored_db, runner):
    result = runner.invoke(app, ["best", "gemm", "--db", str(stored_db)])
    assert result.exit_code == 0, result.output
    assert "1024x1024x1024" in result.output and "NVIDIA H200" in result.output
    data = json.loads(runner.invoke(app, ["best", "--json", "--db", str(stored_db)]).output)
    assert len(data) == 1
    row = data[0]
    assert row["kernel"] == "gemm" and row["shape"] == "1024x1024x1024" and row["metric_unit"] == "TFLOP/s"
    assert set(row["params"]) >= {"BM", "BN", "BK", "PIPELINE"}
    from autotune.spaces import get_space
    from autotune.tuning.evaluation import RecordedMeasurements

    recorded_with = RecordedMeasurements.load(RECORDING).template_hash
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
        (["search", "attention", "--shape", "1x2x3x4"], "BxHxSQxSKVxD or BxHxHKVxSQxSKVxD"),
        (["search", "attention", "--shape", "1x6x4x16x16x64"], "6 query heads are not a multiple of 4 kv heads"),
        (["search", "attention", "--shape", "1x2x4x16x16x64"], "2 query heads are not a multiple of 4 kv heads"),
        (["search", "gemm", "--trials", "0", "--db", str(stored)], "--trials must be at least 1"),
        (["search", "gemm", "--trials", "-5", "--db", str(stored)], "--trials must be at least 1"),
        (["search", "gemm", "--trials", "many"], "Invalid value"),
        (["search", "gemm", "--sampler", "annealing", "--db", str(stored)], "unknown sampler"),
        (["search", "gemm", "--seed", "-1", "--db", str(stored), *replay], "--seed must be between 0 and"),
        (["search", "gemm", "--seed", str(2**32), "--db", str(stored), *replay], "--seed must be between 0 and"),
        (["worker", "some-study", "--db", str(stored), "--seed", "-1"], "--seed must be between 0 and"),
        (["search", "gemm", "--timeout", "0", "--db", str(stored), *replay], "--timeout must be positive"),
        (["search", "gemm", "--compile-batch", "0", "--db", str(stored), *replay], "--compile-batch must be at least"),
        (["search", "gemm", "--db", str(tmp_path / "missing" / "x.db"), *replay], "does not exist"),
        (["search", "gemm", "--db", str(notdb), *replay], "not an SQLite database"),
        (["search", "gemm", "--db", "nosuchdialect://x/y", *replay], "no such database kind"),
        (["search", "gemm", "--replay", str(tmp_path / "none.json"), "--db", str(stored)], "cannot read replay"),
        (["search", "gemm", "--shape", "64x64x64", "--db", str(stored), *replay], "recorded at"),
        (["search", "gemm", "--dtype", "bf16", "--db", str(stored), *replay], "recorded for gemm float32, not bfloat16"),
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
        assert "?" not in result.output, (args, result.output)  # before: `? ? on ?`
        if "--json" in args:
            data = json.loads(result.output)
            summary = data[0] if args[0] == "studies" else data["study"]
            assert summary["kernel"] is None and summary["device"] is None and summary["trials_total"] == 2
        else:
            assert "plain" in result.output and "not a study of autotune" in result.output and "2 trials" in result.output
    out = tmp_path / "configs.json"
    result = runner.invoke(app, ["export", "--out", str(out), "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["devices"] == []
    assert "exported 0 configurations" in result.output
    assert file_digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs.json", "plain.db"]


def test_a_kernel_of_ones_own_searches_by_its_file_reference(tmp_path, runner):
    """The README's commands for examples/vector_add, run as printed from a folder holding examples/ (as the
    repository's root does). Without a GPU the search stops only for the GPU; with a recording standing in for
    the GPU (--replay) it stores its winner, which `best` then lists by the same reference."""
    (tmp_path / "examples").symlink_to(EXAMPLES)
    ref = "./examples/vector_add/my_space.py:MySpace"
    search = ["search", ref, "--shape", "16777216", "--trials", "40"]
    if not has_gpu():
        assert_stopped_only_for_lack_of_gpu(runner.invoke(app, search))
    record_every_config(tmp_path / "rec.json", ref, (16777216,))
    result = runner.invoke(app, [*search, "--replay", str(tmp_path / "rec.json")])
    assert result.exit_code == 0, result.output
    assert "study vector_add-16777216-f32-nvidia-h200-" in result.output and "measured 40 of 40" in result.output
    assert "BLOCK=" in result.output, "configurations described in the space's words"
    best = runner.invoke(app, ["best", ref])
    assert best.exit_code == 0, best.output
    assert "vector_add 16777216 float32 on NVIDIA H200" in best.output and "BLOCK=" in best.output


def test_listing_and_export_take_a_kernel_of_ones_own_by_reference(tmp_path, runner):
    """`studies --kernel REF` and `export --kernel REF` select the rows stored under the space's name; without the
    reference `export --with-binaries` carries such rows without their cubin, and says why, instead of failing."""
    from conftest import nvcc_problem

    ref = f"{EXAMPLES}/vector_add/my_space.py:MySpace"
    record_every_config(tmp_path / "rec.json", ref, (4096,))
    assert runner.invoke(app, ["search", ref, "--trials", "5", "--replay", str(tmp_path / "rec.json")]).exit_code == 0
    listed = runner.invoke(app, ["studies", "--kernel", ref])
    assert listed.exit_code == 0 and "vector_add-4096-f32-nvidia-h200-" in listed.output, listed.output
    exported = runner.invoke(app, ["export", "--kernel", ref, "--out", "own.json"])
    assert exported.exit_code == 0 and "exported 1 configurations" in exported.output, exported.output
    assert json.loads((tmp_path / "own.json").read_text())["devices"][0]["configs"][0]["kernel"] == "vector_add"
    unnamed = runner.invoke(app, ["export", "--out", "all.json", "--with-binaries"])
    assert unnamed.exit_code == 0, unnamed.output
    assert "0 with their cubin (1 of kernels of your own without: name one by --kernel" in unnamed.output
    if not nvcc_problem():
        named = runner.invoke(app, ["export", "--kernel", ref, "--out", "own.json", "--with-binaries"])
        assert named.exit_code == 0 and "1 with their cubin" in named.output, named.output
        binary = json.loads((tmp_path / "own.json").read_text())["devices"][0]["configs"][0]["binary"]
        assert binary["arch"] == "sm_90a" and binary["cubin"]


def _autotune_lines(text: str) -> list[list[str]]:
    return [shlex.split(line.split("autotune ", 1)[1]) for line in text.splitlines() if "autotune search " in line
            or "autotune best " in line]  # fmt: skip


def test_the_commands_new_kernel_prints_run_as_printed(tmp_path, runner):
    """`new-kernel`'s "next:" line and the commands in the space file it writes, run as printed (searches:
    without a GPU, as far as the GPU; with a stand-in recording, to the end)."""
    written = runner.invoke(app, ["new-kernel", "my_add"])
    assert written.exit_code == 0, written.output
    commands = _autotune_lines(written.output) + _autotune_lines((tmp_path / "my_add_space.py").read_text())
    assert [c[0] for c in commands] == ["search", "search", "best"], commands
    record_every_config(tmp_path / "rec.json", "./my_add_space.py:MyAddSpace", (1 << 24,))
    for args in commands:
        if args[0] == "search":
            if not has_gpu():
                assert_stopped_only_for_lack_of_gpu(runner.invoke(app, args))
            args = [*args, "--replay", str(tmp_path / "rec.json")]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert "my_add-16777216-" in result.output if args[0] == "search" else "my_add 16777216" in result.output


READING = [["best"], ["studies"], ["show", "gemm-1024"], ["report", "gemm-1024", "--out", "{out}/report"],
           ["export", "--out", "{out}/configs.json"]]  # fmt: skip


def _read_only_copy(stored_db: Path, tmp_path: Path) -> Path:
    from test_storage import read_only_folder

    folder = tmp_path / "image"
    folder.mkdir()
    (folder / "studies.db").write_bytes(stored_db.read_bytes())
    read_only_folder(folder, folder / "studies.db")
    return folder / "studies.db"


def test_reading_commands_create_nothing_beside_a_read_only_database(tmp_path, stored_db, runner):
    """Each reading command on a copy whose file and folder have no write bit: it works, no file appears beside
    the database and its bytes stay. (As root, who may write anyway, this shows the commands choose to create
    nothing; the next test mounts the folder read-only for real.)"""
    pytest.importorskip("plotly")
    db = _read_only_copy(stored_db, tmp_path)
    before = file_digest(db)
    try:
        for args in READING:
            args = [a.format(out=tmp_path) for a in args]
            result = runner.invoke(app, [*args, "--db", str(db)])
            assert result.exit_code == 0, (args, result.output)
            assert [p.name for p in db.parent.iterdir()] == ["studies.db"], args
            assert file_digest(db) == before, args
    finally:
        os.chmod(db.parent, 0o755)


def _read_only_mount_problem(folder: Path) -> str | None:
    """None where this process may bind-mount ``folder`` read-only in a mount namespace of its own, else why."""
    import shutil
    import subprocess

    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare or mount is not installed"
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount --bind '{folder}' '{folder}' && mount -o "
                            f"remount,ro,bind '{folder}' && ! touch '{folder}/probe' 2>/dev/null"],
                           capture_output=True, text=True)  # fmt: skip
    return None if probe.returncode == 0 else f"cannot mount read-only here: {probe.stderr.strip()[:200]}"


def test_reading_commands_work_on_a_read_only_mount(tmp_path, stored_db):
    """The five reading commands in a process that sees the database's folder mounted read-only (a private mount
    namespace; skipped where that is not allowed). Before, each failed with "unable to open database file"."""
    import subprocess
    import sys

    pytest.importorskip("plotly")
    folder = tmp_path / "image"
    folder.mkdir()
    (folder / "studies.db").write_bytes(stored_db.read_bytes())
    problem = _read_only_mount_problem(folder)
    if problem:
        pytest.skip(problem)
    python = shlex.quote(sys.executable)
    commands = " && ".join(
        f"{python} -m autotune {' '.join(shlex.quote(a.format(out=tmp_path)) for a in args)} --db {folder}/studies.db"
        for args in READING
    )  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parent.parent), *sys.path]))
    result = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount --bind {folder} {folder} && mount -o "
                             f"remount,ro,bind {folder} && {commands}"], capture_output=True, text=True, env=env)  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "exported 1 configurations" in result.stdout and "index.html" in result.stdout
    assert [p.name for p in folder.iterdir()] == ["studies.db"]


def test_bare_autotune_prints_the_help_and_no_error_line(runner):
    """Before: the help, then an empty `error: ` line. The status stays click's for a command line without a
    command (2)."""
    result = runner.invoke(app, [])
    assert result.exit_code == 2
    assert "Usage:" in result.output and "new-kernel" in result.output
    assert "error" not in result.output, result.output


def test_the_dashboards_help_names_the_extra(runner):
    """Before: `pip install 'autotune'` (rich took `[dashboard]` for a markup tag)."""
    result = runner.invoke(app, ["dashboard", "--help"])
    assert result.exit_code == 0
    assert "pip install 'autotune[dashboard]'" in " ".join(result.output.split()), result.output


def test_best_says_which_changed_rows_the_dispatcher_may_still_use(tmp_path, runner):
    """A row of an older template with a machine-code identity (`CodeHash`) is not called stale: the dispatcher
    uses it where its configuration still builds the same cubin (autotune/runtime/code_check.py)."""
    from test_storage import entry

    from autotune.results.storage import Database, resolve_url
    from autotune.spaces import get_space

    db = tmp_path / "b.db"
    database = Database(resolve_url(db))
    params = get_space("gemm").default_config
    database.save_best(entry(params=params, code_hash="e" * 64))
    database.save_best(entry(params=params, shape="1024x1024x1024"))
    database.close()
    text = " ".join(runner.invoke(app, ["best", "gemm", "--db", str(db)]).output.split())
    assert "used where its machine code has not" in text and text.count("stale: the template has changed") == 1
    data = {r["shape"]: r for r in json.loads(runner.invoke(app, ["best", "--json", "--db", str(db)]).output)}
    assert data["4096x4096x4096"]["code_hash"] == "e" * 64 and data["1024x1024x1024"]["code_hash"] is None
    assert all(r["stale"] for r in data.values())  # the template hash did change
