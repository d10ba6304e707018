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


class _Connection:
    """One end of a worker's connection that answers every request with ``reply`` (or hangs: ``reply`` None)."""

    def __init__(self, reply: tuple | None) -> None:
        self.reply = reply
        self.timeouts: list[float] = []

    def send(self, message: tuple) -> None:
        pass

    def poll(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        return self.reply is not None

    def recv(self) -> tuple:
        return self.reply

    def close(self) -> None:
        pass


class _Alive:
    def poll(self) -> None:
        return None

    def kill(self) -> None:
        pass

    def wait(self, timeout: float) -> int:
        return -9


def test_a_fresh_workers_first_request_gets_the_longer_default_timeout():
    """The first request of a (re)started worker builds the validation data on the host: by default it may take
    FIRST_REQUEST_TIMEOUT_S; later ones MIN_TIMEOUT_S (or TIMEOUT_FACTOR × the slowest); an explicit timeout_s
    holds for every request."""
    from autotune.tuning.evaluation import gpu
    from autotune.tuning.evaluation.process import WorkerProcess

    worker = WorkerProcess(0)
    worker._proc, worker._conn = _Alive(), _Connection(("measured", {}, False))
    evaluator = gpu.GpuEvaluator.__new__(gpu.GpuEvaluator)
    evaluator.worker, evaluator.timeout_s, evaluator._slowest_ok = worker, None, 0.0
    evaluator._request("evaluate", {})
    evaluator._request("evaluate", {})
    assert worker._conn.timeouts == [gpu.FIRST_REQUEST_TIMEOUT_S, gpu.MIN_TIMEOUT_S]
    assert gpu.FIRST_REQUEST_TIMEOUT_S > gpu.MIN_TIMEOUT_S

    # A hang kills the worker: the next one is fresh again.
    worker._conn.reply = None
    failed = evaluator._request("evaluate", {})
    assert failed.failure == "timeout" and worker.answered == 0
    worker._proc, worker._conn = _Alive(), _Connection(("measured", {}, False))
    worker.spawn = lambda: None  # not called: the stand-in process is alive
    evaluator._request("evaluate", {})
    assert worker._conn.timeouts == [gpu.FIRST_REQUEST_TIMEOUT_S]

    evaluator.timeout_s = 3.0
    evaluator._request("evaluate", {})
    assert worker._conn.timeouts[-1] == 3.0
