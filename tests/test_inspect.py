"""autotune studies / show / report / dashboard on databases filled by replayed searches."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.results.storage import Database, resolve_url

from conftest import DATA, file_digest

RECORDING = DATA / "replay_gemm_h200.json"


@pytest.fixture(scope="module")
def two_studies(tmp_path_factory) -> Path:
    """A database with two gemm studies (the real H200 recording, and a synthetic one at another shape)."""
    from synthetic import make_recording

    folder = tmp_path_factory.mktemp("inspect")
    db = folder / "s.db"
    other = folder / "other.json"
    make_recording(other, shape=(2048, 2048, 2048))
    runner = CliRunner()
    for recording, trials in ((RECORDING, 40), (other, 30)):
        result = runner.invoke(app, ["search", "gemm", "--trials", str(trials), "--replay", str(recording),
                                     "--db", str(db), "--seed", "4"])  # fmt: skip
        assert result.exit_code == 0, result.output
    return db


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_studies_text_and_json(two_studies):
    code, text = run("studies", "--db", str(two_studies))
    assert code == 0
    assert "gemm-1024x1024x1024-f32-nvidia-h200-" in text and "gemm-2048x2048x2048-f32-nvidia-h200-" in text
    assert "40 complete" in text and "x default" in text
    code, out = run("studies", "--json", "--db", str(two_studies))
    rows = {r["shape"]: r for r in json.loads(out)}
    real = rows["1024x1024x1024"]
    assert real["trials_complete"] == 40 and real["trials_failed"] == {} and real["trials_rejected"] > 0
    assert real["best_time_ms"] < real["default_time_ms"] and real["speedup_over_default"] > 1
    assert real["metric_unit"] == "TFLOP/s" and real["device"] == "NVIDIA H200" and real["last_update"]
    synthetic = rows["2048x2048x2048"]
    assert sum(synthetic["trials_failed"].values()) > 0, "the synthetic recording has failures"
    code, out = run("studies", "--kernel", "gemm", "--device", "NVIDIA H100", "--db", str(two_studies))
    assert code == 0 and "no studies of gemm on NVIDIA H100" in out


def test_show_by_unique_prefix(two_studies):
    code, text = run("show", "gemm-2048", "--top", "3", "--db", str(two_studies))
    assert code == 0 and "gemm-2048x2048x2048" in text and "failures by reason" in text
    code, out = run("show", "gemm-1024", "--top", "5", "--json", "--db", str(two_studies))
    data = json.loads(out)
    assert len(data["top"]) == 5
    times = [t["time_ms"] for t in data["top"] if t["retimed"]]
    assert times == sorted(times) and data["top"][0]["time_ms"] == data["study"]["best_time_ms"]
    first = data["top"][0]
    assert first["registers"] and first["shared_bytes"] and first["compile_s"] is not None and first["params"]
    code, out = run("show", "gemm-2048", "--json", "--db", str(two_studies))
    failures = json.loads(out)["failures"]
    assert set(failures) <= {"wrong", "compile"} and all(f["count"] > 0 and f["example"] for f in failures.values())


def test_report_writes_the_plots(two_studies, tmp_path):
    pytest.importorskip("plotly")
    pytest.importorskip("matplotlib")
    out = tmp_path / "report"
    code, text = run("report", "gemm-1024", "--out", str(out), "--db", str(two_studies))
    assert code == 0, text
    index = (out / "index.html").read_text()
    assert "gemm-1024x1024x1024" in index and "Plotly.newPlot" in index and index.count("plotly-graph-div") >= 3
    for name in ("history.png", "importances.png", "metric_vs_params.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name


def test_bad_input(two_studies, tmp_path):
    empty = tmp_path / "empty.db"
    Database(resolve_url(empty)).close()  # our tables, no study
    a_file = tmp_path / "notes.txt"
    a_file.write_text("my notes\n")
    before = {p: file_digest(p) for p in (two_studies, empty, a_file)}
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = str(busy.getsockname()[1])
    cases = [
        (["show", "nosuch", "--db", str(two_studies)], "no study 'nosuch'"),
        (["show", "gemm-", "--db", str(two_studies)], "is ambiguous"),
        (["report", "gemm-", "--out", str(tmp_path / "r"), "--db", str(two_studies)], "is ambiguous"),
        (["show", "gemm", "--db", str(empty)], "no studies in"),
        (["studies", "--db", str(empty)], "no studies in"),
        (["studies", "--db", str(tmp_path / "absent.db")], "does not exist"),
        (["show", "gemm", "--db", str(tmp_path / "absent.db")], "does not exist"),
        (["show", "gemm-1024", "--top", "0", "--db", str(two_studies)], "--top must be at least 1"),
        (["report", "gemm-1024", "--out", str(tmp_path / "no" / "r"), "--db", str(two_studies)], "does not exist"),
        (["studies", "--kernel", "fft", "--db", str(two_studies)], "unknown kernel"),
        (["report", "gemm-1024", "--out", str(a_file), "--db", str(two_studies)], "notes.txt: it is a file"),
    ]
    try:
        import optuna_dashboard  # noqa: F401
    except ImportError:
        cases.append((["dashboard", "--db", str(two_studies)], "needs optuna-dashboard"))
    else:
        cases += [
            (["dashboard", "--port", port, "--db", str(two_studies)], "cannot listen on"),
            (["dashboard", "--db", str(empty)], "no studies in"),
            (["dashboard", "--port", "70000", "--db", str(two_studies)], "--port must be between"),
        ]
    for args, message in cases:
        code, text = run(*args)
        text = text.strip()
        assert code == 2 and text.startswith("error:") and message in text, (args, text)
        assert len(text.splitlines()) == 1, (args, text)
    busy.close()
    assert {p: file_digest(p) for p in before} == before, "reading never writes"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_in_a_real_browser(two_studies, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium)")
    pytest.importorskip("optuna_dashboard")
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent.parent), *sys.path]))
    server = subprocess.Popen([sys.executable, "-m", "autotune", "dashboard", "--port", str(port), "--db",
                               str(two_studies)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as response:
                    studies = json.loads(response.read())["study_summaries"]
                    break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, server.stdout.read().decode()[-2000:]
                time.sleep(0.5)
        study_id = next(s["study_id"] for s in studies if s["study_name"].startswith("gemm-1024"))
        page = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000", "--dump-dom",
             f"http://127.0.0.1:{port}/dashboard/studies/{study_id}/trials"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        dom = page.stdout
        assert "gemm-1024x1024x1024-f32-nvidia-h200-" in dom, dom[-3000:]
        assert "Trial 0" in dom and "Complete" in dom, "the trials are listed"
        for attr in ("outcome", "metric", "registers", "measurement"):
            assert attr in dom, f"our user attribute {attr} is shown"
    finally:
        server.terminate()
        server.wait(10)
