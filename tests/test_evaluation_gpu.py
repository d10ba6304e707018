"""GpuEvaluator's start without a GPU: a stand-in worker on the other end of the pipe.

The worker's set-up runs in a thread after the constructor returns, so that it overlaps the search's first
compiles; a set-up that fails must still stop the search with its one-line `DeviceError`."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import Future
from multiprocessing import Pipe

import pytest

from autotune.compiler import CompileResult
from autotune.errors import DeviceError
from autotune.evaluation import gpu
from autotune.spaces import get_space

from conftest import H200


class StandInProcess:
    """What GpuEvaluator asks of a worker's process handle; killing it closes its end of the pipe, as the
    death of a real worker does."""

    def __init__(self, end) -> None:
        self.killed = threading.Event()
        self.end = end

    def poll(self) -> int | None:
        return -9 if self.killed.is_set() else None

    def kill(self) -> None:
        if not self.killed.is_set():
            self.killed.set()
            self.end.close()

    def wait(self, timeout: float | None = None) -> int:
        self.killed.wait(timeout)
        return -9


class StandInCompiler:
    version, flags, jobs = "13.0", (), 2

    def submit(self, template, defines) -> Future:
        future: Future = Future()
        future.set_result(CompileResult(ok=True, key="k", cubin="stand-in.cubin"))
        return future

    def close(self) -> None:
        pass


def stand_in_worker(monkeypatch, answer_setup):
    """Patch `start_worker`: the worker says which GPU it is, then answers "setup" with ``answer_setup()``."""
    setups = []

    def start(device_ordinal):
        parent, child = Pipe(duplex=True)
        proc = StandInProcess(child)

        def serve():
            try:
                child.send(("device", dataclasses.asdict(H200)))
                while not proc.killed.is_set():
                    if child.poll(0.05):
                        kind, payload = child.recv()
                        if kind == "setup":
                            setups.append(payload)
                            child.send(answer_setup())
                        elif kind == "stop":
                            proc.kill()
            except (OSError, EOFError):
                pass  # killed

        threading.Thread(target=serve, daemon=True).start()
        return proc, parent

    monkeypatch.setattr(gpu, "start_worker", start)
    monkeypatch.setattr(gpu, "stop_worker", lambda proc, wait_s=10.0: (proc.kill(), -9)[1])
    return setups


def test_the_set_up_runs_beside_the_caller_and_is_timed(monkeypatch):
    def slow_ready():
        time.sleep(0.6)  # the fp64 reference of a large target shape
        return ("ready", None)

    setups = stand_in_worker(monkeypatch, slow_ready)
    started = time.perf_counter()
    evaluator = gpu.GpuEvaluator(get_space("gemm"), (256, 256, 256), compiler=StandInCompiler())
    try:
        assert time.perf_counter() - started < 0.5  # returned before the set-up finished
        evaluator.wait_ready()
        phases = evaluator.startup()
        assert list(phases) == ["worker start", "validation + baseline compile", "worker set-up"]
        assert phases["worker set-up"] >= 0.6
        (setup,) = setups
        assert setup["compare_cubin"] == "stand-in.cubin" and tuple(setup["shape"]) == (256, 256, 256)
    finally:
        evaluator.close()


def test_a_set_up_that_fails_fails_every_candidate_with_its_line(monkeypatch):
    stand_in_worker(monkeypatch, lambda: ("fatal", "GPU worker setup failed: out of memory"))
    space = get_space("gemm")
    evaluator = gpu.GpuEvaluator(space, (256, 256, 256), compiler=StandInCompiler())
    try:
        future = evaluator.submit(space.default_config)
        with pytest.raises(DeviceError, match="^GPU worker setup failed: out of memory$"):
            future.result(timeout=30)
        with pytest.raises(DeviceError, match="out of memory"):
            evaluator.wait_ready()
    finally:
        evaluator.close()


def test_close_during_the_set_up_returns(monkeypatch):
    never = threading.Event()

    def hang():
        never.wait(30)  # a set-up still running when the search is interrupted
        return ("ready", None)

    stand_in_worker(monkeypatch, hang)
    evaluator = gpu.GpuEvaluator(get_space("gemm"), (256, 256, 256), compiler=StandInCompiler())
    started = time.perf_counter()
    evaluator.close()
    never.set()
    assert time.perf_counter() - started < 10
    with pytest.raises(DeviceError):
        evaluator.wait_ready()
