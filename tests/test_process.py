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


class _Script:
    """A parent's end of a worker's connection that sends ``requests`` in turn and keeps what comes back."""

    def __init__(self, requests: list[tuple]) -> None:
        self.requests, self.sent = list(requests), []

    def recv(self) -> tuple:
        if not self.requests:
            raise EOFError
        return self.requests.pop(0)

    def send(self, message: tuple) -> None:
        self.sent.append(message)


def test_a_second_setup_replaces_the_session_in_the_same_worker(monkeypatch):
    """The next shape of a command (a range's buckets) sets the running worker up again: the old session is
    closed, the new one answers; a set-up that fails answers "fatal" and ends the worker with no session open."""
    from autotune.tuning.evaluation import worker
    from autotune.tuning.evaluation.base import Measurement, Timing

    sessions = []

    class Session:
        class cuda:  # noqa: N801 (pycuda's module, as the worker uses it)
            Error = RuntimeError

        def __init__(self, setup, info, ordinal) -> None:
            assert all(s.closed for s in sessions), "the old session is freed before the next is built"
            if setup.shape == (0,):
                raise ValueError("no such shape")
            self.shape, self.closed = setup.shape, False
            sessions.append(self)

        def evaluate(self, config, cubin, race_ms):
            return Measurement(ok=True, timing=Timing(*(float(self.shape[0]),) * 5, 3))

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(worker, "GpuSession", Session)
    setup = {"space_ref": "gemm", "seed": 0, "dtype": "float32", "compare_cubin": "", "cache_dir": "/tmp"}
    evaluate = ("evaluate", {"config": {}, "cubin": ""})
    conn = _Script([evaluate, ("setup", {**setup, "shape": (2,)}), evaluate, ("stop", None)])
    worker._serve(conn, Session(worker.Setup(**setup, shape=(1,)), None, 0), None, 0)
    assert [m[0] for m in conn.sent] == ["result", "ready", "result"]
    assert [m[1]["timing"]["median"] for m in conn.sent if m[0] == "result"] == [1.0, 2.0]
    assert [s.closed for s in sessions] == [True, True]

    conn = _Script([("setup", {**setup, "shape": (0,)}), evaluate])
    worker._serve(conn, Session(worker.Setup(**setup, shape=(3,)), None, 0), None, 0)
    assert [m[0] for m in conn.sent] == ["fatal"] and "no such shape" in conn.sent[0][1]
    assert conn.requests == [evaluate], "the worker ended"
    assert sessions[-1].closed


class _Worker:
    """A stand-in `WorkerProcess`: alive or not, refusing its set-up or not; records what was asked of it."""

    def __init__(self, device_ordinal: int = 0, alive: bool = True, refuses: bool = False) -> None:
        self._alive, self.refuses, self.calls, self.answered, self.restarts = alive, refuses, [], 0, 0

    def alive(self) -> bool:
        return self._alive

    def spawn(self) -> str:
        self.calls.append("spawn")
        return "device"

    def configure(self, setup) -> None:
        self.calls.append("configure")
        if self.refuses:
            from autotune.errors import DeviceError

            raise DeviceError("GPU worker setup failed: out of memory")

    def kill(self) -> None:
        self.calls.append("kill")
        self._alive = False

    def stop(self) -> None:
        self.calls.append("stop")
        self._alive = False


def test_a_released_worker_stays_up_and_only_a_live_set_up_one_is_handed_on():
    """`GpuEvaluator.release_worker` stops feeding and hands the live worker on (its `close` then leaves it
    running); a dead one, or one whose start failed, is not handed on."""
    import queue
    import threading

    from autotune.tuning.evaluation import gpu

    def evaluator_with(worker):
        evaluator = gpu.GpuEvaluator.__new__(gpu.GpuEvaluator)
        evaluator._owns_queue, evaluator._owns_compiler, evaluator._queue = True, False, queue.Queue()
        evaluator._feeder = threading.Thread(target=evaluator._feed, daemon=True)
        evaluator._feeder.start()
        evaluator.worker, evaluator.device, evaluator.device_ordinal = worker, "device", 0
        evaluator._start = _Start(up=True)
        return evaluator

    live = _Worker()
    evaluator = evaluator_with(live)
    assert evaluator.release_worker() == (live, "device")
    evaluator.close()
    assert live.calls == [] and not evaluator._feeder.is_alive()
    assert evaluator_with(_Worker(alive=False)).release_worker() is None

    # A release before the worker came up (its start failed) hands nothing on.
    failed = evaluator_with(_Worker())
    failed._start = _Start(up=False)
    assert failed.release_worker() is None


class _Start:
    """A stand-in `WorkerStart` whose worker came up (or did not)."""

    def __init__(self, up: bool) -> None:
        self.up = up

    def join(self) -> None:
        pass

    def ready(self) -> bool:
        return self.up

    def cancel(self) -> None:
        pass


def test_a_handed_on_worker_that_refuses_its_set_up_is_started_afresh_once():
    """`WorkerStart`: a handed-on worker whose set-up fails (it died, or cannot hold the next problem) is killed,
    started again and set up once more; a worker of the search's own that fails is the search's failure."""
    from autotune.tuning.evaluation.worker_start import WorkerStart

    class Refusing(_Worker):
        def configure(self, setup) -> None:
            self.calls.append("configure")
            if self.calls.count("configure") == 1:
                from autotune.errors import DeviceError

                raise DeviceError("GPU worker setup failed: out of memory")

    start = WorkerStart.__new__(WorkerStart)
    start.worker, start.handed_on, start.setup, start._cancelled = Refusing(), True, "setup", False
    start._configure()
    assert start.worker.calls == ["configure", "kill", "spawn", "configure"]
    start.worker, start.handed_on = Refusing(), False
    with pytest.raises(Exception, match="out of memory"):
        start._configure()
    start.worker, start.handed_on, start._cancelled = Refusing(), True, True
    with pytest.raises(Exception, match="out of memory"):
        start._configure()  # the search has ended: no new process
    assert start.worker.calls == ["configure"]


def test_the_worker_comes_up_beside_the_first_compiles(monkeypatch):
    """The evaluator returns once the parent knows the GPU: its compiler takes candidates while the worker
    starts and is set up in a thread; the first measurement waits for the worker. A worker that cannot be set up
    fails the candidates' futures with its `DeviceError` (the search stops with it), and is not left running."""
    import threading

    from conftest import H200

    from autotune.errors import DeviceError
    from autotune.spaces import get_space
    from autotune.tuning.evaluation import gpu

    class SlowWorker(_Worker):
        refuse = False
        may_start = threading.Event()  # the test lets the worker start only once the evaluator has returned

        def spawn(self):
            assert self.may_start.wait(10), "the evaluator waited for its worker before returning"
            self.calls.append("spawn")
            return H200

        def configure(self, setup) -> None:
            self.calls.append("configure")
            if self.refuse:
                raise DeviceError("GPU worker setup failed: out of memory")

        def request(self, kind, payload, timeout):
            self.answered += 1
            timing = {"median": 1.0, "minimum": 1.0, "q1": 1.0, "q3": 1.0, "maximum": 1.0, "reps": 1}
            return ("result", {"ok": True, "timing": timing, "evaluate_s": 0.01}, False)

    class Compiler:
        version, flags, jobs = "stand-in", (), 2

        def __init__(self, arch, **_):
            pass

        def submit(self, template, defines, varying=()):
            from concurrent.futures import Future

            from autotune.runtime.compiler import CompileResult

            future = Future()
            future.set_result(CompileResult(ok=True, key="k", cubin="/nonexistent.cubin"))
            return future

        def close(self):
            pass

    made = []
    monkeypatch.setattr(gpu, "WorkerProcess", lambda ordinal: made.append(SlowWorker()) or made[-1])
    monkeypatch.setattr(gpu, "parent_device", lambda ordinal: H200)
    monkeypatch.setattr(gpu, "Compiler", Compiler)
    space = get_space("gemm")
    evaluator = gpu.GpuEvaluator(space, (256, 256, 256))  # returns with the worker not started
    try:
        pending = evaluator.submit(space.default_config)
        assert made[0].calls == [] and not pending.done()
        SlowWorker.may_start.set()
        measurement = pending.result(timeout=10)
        assert measurement.ok and made[0].calls == ["spawn", "configure"]
        assert set(evaluator.beside) == {"worker", "build", "setup"}
    finally:
        evaluator.close()
    assert made[0].calls[-1] == "stop"

    SlowWorker.refuse = True
    evaluator = gpu.GpuEvaluator(space, (256, 256, 256))
    try:
        with pytest.raises(DeviceError, match="out of memory"):
            evaluator.submit(space.default_config).result(timeout=10)
        assert "kill" in made[1].calls and not made[1].alive()
    finally:
        evaluator.close()
