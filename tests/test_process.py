"""The GPU worker runs as its own module: a script calling autotune at its top level (no main guard) works."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autotune.tuning.evaluation.process import start_worker, stop_worker

from conftest import gpu_problem

ROOT = Path(__file__).parent.parent

SCRIPT = textwrap.dedent(
    """
    import autotune
    print("top level ran", flush=True)
    report = autotune.tune("gemm", "256x256x256", trials=3, db="unguarded.db", seed=1)
    print("best", report.best.time_ms)
    """
)


@pytest.mark.nvcc
def test_tune_at_the_top_level_of_a_script_without_main_guard(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=900)  # fmt: skip
    assert run.stdout.count("top level ran") == 1, "the worker must not import the caller's script"
    assert "exited during start" not in run.stderr, run.stderr[-2000:]
    if gpu_problem() is None:
        assert run.returncode == 0 and "best" in run.stdout, run.stderr[-2000:]
    else:  # no GPU here: the worker itself starts and says why it cannot measure
        assert run.returncode != 0
        last = run.stderr.strip().splitlines()[-1]
        assert "DeviceError" in last and ("CUDA" in last or "pycuda" in last or "GPU" in last), last


def test_worker_module_answers_over_its_connection():
    proc, conn = start_worker(0)
    try:
        assert conn.poll(120), "the worker says something within its start-up"
        kind, payload = conn.recv()
        assert kind in ("device", "fatal") and payload
    finally:
        conn.close()  # the worker sees EOF and exits
        code = stop_worker(proc)
    assert code is not None
