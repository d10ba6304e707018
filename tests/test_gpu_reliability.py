"""GPU tier: a real search killed with SIGKILL resumes to completion; a shape too large for the GPU is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from typer.testing import CliRunner

from autotune.cli import app
from autotune.results import studies
from autotune.results.storage import Database, resolve_url
from autotune.spaces import get_space
from autotune.spaces.optuna_mapping import config_of

pytestmark = pytest.mark.gpu


def measured_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        summaries = optuna.get_all_study_summaries(resolve_url(db))
        if not summaries:
            return 0
        study = optuna.load_study(study_name=summaries[0].study_name, storage=resolve_url(db))
        return sum(studies.is_measured(t) for t in study.trials)
    except Exception:
        return 0  # still being created


def test_sigkill_mid_search_then_resume(tmp_path):
    db = tmp_path / "k.db"
    command = [sys.executable, "-m", "autotune", "search", "gemm", "--shape", "1024x1024x1024", "--trials", "40",
               "--db", str(db), "--seed", "3"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent.parent), *sys.path]))
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    while measured_count(db) < 8 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert proc.poll() is None, "the search must still be running when it is killed"
    before = measured_count(db)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 8 <= before < 40
    time.sleep(21)  # heartbeats of the killed process expire (4 x 5 s)
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    study = optuna.load_study(study_name=optuna.get_all_study_summaries(resolve_url(db))[0].study_name,
                              storage=resolve_url(db))  # fmt: skip
    assert sum(studies.is_measured(t) for t in study.trials) == 40
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    (row,) = Database(resolve_url(db), create=False).best("gemm")
    assert config_of(get_space(row.kernel), study.trials[row.trial_number].params) == row.config


def test_a_shape_too_large_for_the_gpu_is_refused(tmp_path):
    db = tmp_path / "huge.db"
    result = CliRunner().invoke(app, ["search", "gemm", "--shape", "200000x200000x200000", "--db", str(db)])
    text = result.output.strip()
    assert result.exit_code == 2 and text.startswith("error:") and "GiB of GPU memory" in text, text
    assert len(text.splitlines()) == 1 and not db.exists()
