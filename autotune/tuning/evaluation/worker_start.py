"""Bringing a search's GPU worker up beside its first compiles, and handing it from one search to the next.

A cold search used to wait 3.4 s before its first compile (H200, the README job, 2026-11-29h): 1.7 s for the
worker process (imports, CUDA context), 0.7 s for the validation kernel and the baseline, 1.0 s for the target's
inputs and float64 references. The parent now asks the driver which GPU it is (`parent_device`: the architecture
to compile for), so the compiles start at once while `WorkerStart` brings the worker up in a thread; the first
candidate to reach the GPU waits for it (`WorkerStart.wait`).

`WorkerHandoff` keeps a worker between the searches of one command (a range's buckets, a list of shapes): the next
search's evaluator sets it up again instead of starting a process.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from autotune.device import DeviceInfo
from autotune.errors import DeviceError
from autotune.runtime.compiler import Compiler, CompileResult
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace
from autotune.tuning.evaluation.gpu_session import Setup
from autotune.tuning.evaluation.process import WorkerProcess

COMPARE_KERNEL = Path(__file__).with_name("compare.cu")


def parent_device(device_ordinal: int) -> DeviceInfo:
    """GPU ``device_ordinal`` as the driver describes it, asked in this process (no context is created), and
    checked for what the worker will need: so that a machine without either fails before anything is written."""
    if importlib.util.find_spec("pycuda") is None:
        raise DeviceError("pycuda is not installed; on a GPU machine: pip install 'autotune[cuda]'")
    from autotune.device import query_device

    return query_device(device_ordinal)


Checkers = tuple["Future[CompileResult]", "Future[CompileResult] | None"]


def submit_checkers(compiler: Compiler, space: KernelSpace, shape: Shape, baseline: Config | None) -> Checkers:
    """The validation kernel's and the baseline configuration's compiles, side by side."""
    compare = compiler.submit(COMPARE_KERNEL, {})
    if baseline is None:
        return compare, None
    return compare, compiler.submit(space.template_for(baseline), space.compile_defines(baseline, shape))


def checker_cubins(jobs: Checkers) -> tuple[str, str | None]:
    """The cubins of `submit_checkers`; `DeviceError` if either failed to build."""
    compare = jobs[0].result()
    if not compare.ok or not compare.cubin:
        raise DeviceError(f"cannot build the validation kernel: {compare.error}")
    if jobs[1] is None:
        return compare.cubin, None
    built = jobs[1].result()
    if not built.ok or not built.cubin:
        raise DeviceError(f"cannot build the baseline configuration that sets tolerances: {built.error}")
    return compare.cubin, built.cubin


class WorkerStart:
    """Brings ``worker`` up in a thread: started (unless ``handed_on``: already running) beside the checkers'
    compiles, then set up for the problem. `phases` says where its time went; `wait` blocks until it is ready."""

    def __init__(self, worker: WorkerProcess, compiler: Compiler, space: KernelSpace, shape: Shape,
                 setup: dict[str, Any], handed_on: bool) -> None:  # fmt: skip
        """``setup``: the `Setup` fields but the checkers' cubins and the baseline configuration."""
        self.worker = worker
        self.handed_on = handed_on
        self.setup: Setup | None = None
        self.phases: dict[str, float] = {}
        self._error: BaseException | None = None
        self._cancelled = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(compiler, space, shape, setup), name="gpu-start",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _run(self, compiler: Compiler, space: KernelSpace, shape: Shape, fields: dict[str, Any]) -> None:
        began = time.perf_counter()
        try:
            baseline = space.baseline_config()
            jobs = submit_checkers(compiler, space, shape, baseline)
            if not self.handed_on:
                if self._cancelled:
                    raise DeviceError("the search ended before its GPU worker started")
                self.worker.spawn()
                self.phases["worker"] = time.perf_counter() - began
            mark = time.perf_counter()
            compare, baseline_cubin = checker_cubins(jobs)
            self.phases["build"] = time.perf_counter() - mark
            mark = time.perf_counter()
            self.setup = Setup(**fields, compare_cubin=compare, baseline_config=baseline, baseline_cubin=baseline_cubin)
            self._configure()
            self.phases["setup"] = time.perf_counter() - mark
        except BaseException as exc:  # raised to whoever waits: the search's first candidate, or the caller
            self._error = exc
            self.worker.kill()
        finally:
            self._done.set()

    def _configure(self) -> None:
        """Send the set-up. A handed-on worker that cannot take it (it died since, or its last problem left it
        unable) is started afresh and set up once more: a new process would have been started anyway."""
        assert self.setup is not None
        try:
            self.worker.configure(self.setup)
        except (DeviceError, OSError):  # OSError: the pipe of a worker that has died
            if not self.handed_on or self._cancelled:
                raise
            self.worker.kill()
            self.worker.spawn()
            self.worker.configure(self.setup)

    def ready(self) -> bool:
        return self._done.is_set() and self._error is None

    def cancel(self) -> None:
        """End a start still under way: its worker is killed (a finished start is left as it is)."""
        if not self._done.is_set():
            self._cancelled = True
            self.worker.kill()

    def wait(self) -> None:
        """Block until the worker is set up; raise what stopped it (`DeviceError`, mostly)."""
        self._done.wait()
        if self._error is not None:
            raise self._error

    def join(self) -> None:
        """Wait for the thread, whatever became of it (before the worker is stopped or handed on)."""
        self._done.wait()


class WorkerHandoff:
    """GPU workers kept between the searches of one command: the next search's evaluator takes this GPU's worker
    and sets it up for its problem, instead of starting a process (`autotune.tuning.tune`'s ``handoff``).
    `close` stops those still kept."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[WorkerProcess, DeviceInfo]] = {}

    def take(self, device_ordinal: int) -> "tuple[WorkerProcess, DeviceInfo] | None":
        return self._kept.pop(device_ordinal, None)

    def keep(self, device_ordinal: int, started: "tuple[WorkerProcess, DeviceInfo] | None") -> None:
        if started is not None:
            self._kept[device_ordinal] = started

    def close(self) -> None:
        for worker, _ in self._kept.values():
            worker.stop()
        self._kept.clear()
