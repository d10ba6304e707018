"""GpuEvaluator: nvcc in parallel ahead of the GPU, then one GPU worker process that validates and times.

    submit(config) ─► Compiler (nvcc pool) ─► queue ─► feeder thread ─► worker process (pycuda)
                      │ far slower than the search's            │ timeout: kill + restart, trial fails "timeout"
                      │ other compiles: stopped, "compile"      │ worker died / sticky CUDA error: restart, "crash"
                                                                │ clearly slower than the leaders: timed twice only

The compile deadline is `autotune.runtime.compiler.CompileDeadline`, the race line
`autotune.tuning.evaluation.racing.RaceLine` (shared by every GPU of a search).

The worker comes up beside the first compiles (`autotune.tuning.evaluation.worker_start`): no GPU or no pycuda
is found by the parent before anything is written; a worker that then cannot be set up fails the first
candidate's future with `DeviceError`, and the search with it.

A candidate never raises: every outcome is a `Measurement`. Only a worker that cannot start at all raises
`DeviceError`, since no search can go on then.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Sequence

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.runtime.compiler import CompileDeadline, Compiler, CompileResult, cache_root
from autotune.shape import Shape, format_shape
from autotune.spaces.base import Config, KernelSpace, Launch
from autotune.tuning.evaluation.base import Evaluator, Measurement, Timing, Toolchain
from autotune.tuning.evaluation.process import WorkerProcess
from autotune.tuning.evaluation.racing import RaceLine
from autotune.tuning.evaluation.worker_start import WorkerHandoff, WorkerStart, parent_device

__all__ = ["GpuEvaluator", "WorkerHandoff", "pool_shares"]

MIN_TIMEOUT_S = 10.0
# Least default timeout of a fresh worker's first request: it draws the validation cases' inputs and float64
# references on the host before the candidate runs, which took over 10 s on a loaded host (12 searches beside nvcc).
FIRST_REQUEST_TIMEOUT_S = 60.0
TIMEOUT_FACTOR = 20.0  # default per-candidate timeout: this many times the slowest good evaluation so far


class GpuEvaluator(Evaluator):
    def __init__(
        self,
        space: KernelSpace,
        shape: Shape,
        *,
        seed: int = 0,
        timeout_s: float | None = None,
        flush_l2: bool = True,
        min_time_ms: float = 25.0,
        max_reps: int = 100,
        jobs: int | None = None,
        device_ordinal: int = 0,
        cache_dir: Path | None = None,
        compiler: Compiler | None = None,
        work_queue: "queue.Queue[tuple | None] | None" = None,
        started: "tuple[WorkerProcess, DeviceInfo] | None" = None,
        racing: bool = True,
        race_line: RaceLine | None = None,
        compile_batch: int = 1,
    ) -> None:
        """``compiler`` and ``work_queue``: shared with the evaluators of other GPUs (`MultiGpuEvaluator`), which
        then owns them: compiled candidates go to whichever GPU's feeder is free first. ``started``: a worker
        already spawned for ``device_ordinal`` and the device it reported (its start-up overlapped another's).
        ``racing``: time a candidate clearly slower than the fastest so far by two runs only; ``race_line``: the
        line shared with the other GPUs of the search. ``compile_batch``: configurations that may share one nvcc
        front end (`autotune.runtime.compiler.Compiler`'s ``batch``)."""
        self.space = space
        self.race_line = race_line if race_line is not None else (RaceLine() if racing else None)
        self._owns_compiler = compiler is None
        self._owns_queue = work_queue is None
        self.shape = tuple(shape)
        self.timeout_s = timeout_s
        self.device_ordinal = device_ordinal
        self._slowest_ok = 0.0
        self._cache_dir = cache_dir or cache_root()

        # The parent asks the driver which GPU this is (the architecture to compile for): compiles start at once,
        # while the worker comes up beside them (`WorkerStart`); the first candidate to reach the GPU waits for it.
        t0 = time.perf_counter()
        if started is not None:
            self.worker, self.device = started
        else:
            self.device = parent_device(device_ordinal)
            self.worker = WorkerProcess(device_ordinal)
        try:
            needed = space.device_bytes(space.default_config, self.shape)
            if needed > 0.9 * self.device.total_memory:
                raise InvalidArgument(
                    f"shape {format_shape(self.shape)} needs {needed / 2**30:.1f} GiB of GPU memory; "
                    f"{self.device.name} has {self.device.total_memory / 2**30:.1f} GiB"
                )
            self.compiler = compiler or Compiler(self.device.compile_arch, cache_dir=cache_dir, jobs=jobs,
                                                 deadline=CompileDeadline(), batch=compile_batch)  # fmt: skip
            self.toolchain = Toolchain(nvcc=self.compiler.version, flags=list(self.compiler.flags))
            fields = dict(space_ref=type(space).ref(), shape=self.shape, seed=seed, dtype=space.dtype,
                          cache_dir=str(self._cache_dir), flush_l2=flush_l2, min_time_ms=min_time_ms,
                          max_reps=max_reps)  # fmt: skip
        except BaseException:
            self.worker.kill()  # spawned here or handed on: nobody else would stop it
            raise
        self._start = WorkerStart(self.worker, self.compiler, space, self.shape, fields, handed_on=started is not None)
        # What the search waited for before its first compile (`Profile.startup`); the worker's own phases,
        # beside the compiles, are `beside` once it is up.
        self.startup = {"device": time.perf_counter() - t0}

        self._queue: "queue.Queue[tuple | None]" = work_queue if work_queue is not None else queue.Queue()
        self._feeder: threading.Thread | None = None
        if self._owns_queue:  # a shared queue's owner starts each feeder once its worker is up (`MultiGpuEvaluator`)
            self.start_feeding()

    def start_feeding(self) -> None:
        """Start taking compiled candidates from the queue (each waits, if need be, for the worker to be up)."""
        self._feeder = threading.Thread(target=self._feed, name="gpu-feeder", daemon=True)
        self._feeder.start()

    @property
    def beside(self) -> dict[str, float]:
        """The worker's start-up phases (process, checkers, set-up), which ran beside the first compiles."""
        return dict(self._start.phases)

    def wait_started(self) -> None:
        """Block until the worker is set up; raise what stopped it. `MultiGpuEvaluator` waits for its first GPU
        (whose set-up writes the shape's references to the disk cache) before the others start theirs."""
        self._start.wait()

    # --- the worker -----------------------------------------------------------------------------------------
    @property  # type: ignore[override]
    def restarts(self) -> int:
        """Worker restarts so far (crashes, hangs)."""
        return self.worker.restarts

    def _timeout(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        floor = FIRST_REQUEST_TIMEOUT_S if self.worker.answered == 0 else MIN_TIMEOUT_S
        return max(floor, TIMEOUT_FACTOR * self._slowest_ok)

    def _request(self, kind: str, payload: dict, scale: float = 1.0) -> tuple[str, Any, bool] | Measurement:
        """Send one request; a Measurement comes back instead of a reply when the worker hung or died.

        ``scale``: how many candidate evaluations' worth of GPU work the request holds (for its timeout)."""
        return self.worker.request(kind, payload, self._timeout() * max(1.0, scale))

    # --- evaluation -----------------------------------------------------------------------------------------
    def submit(self, config: Config) -> "Future[Measurement]":
        future: Future[Measurement] = Future()
        template, defines = self.space.template_for(config), self.space.compile_defines(config, self.shape)
        compiling = self.compiler.submit(template, defines, varying=self.space.tunable_names(config))
        compiling.add_done_callback(lambda f: self._compiled(config, f, future))
        return future

    def _compiled(self, config: Config, compiling: "Future[CompileResult]", future: "Future[Measurement]") -> None:
        try:
            result = compiling.result()
        except Exception as exc:  # the compiler itself broke (nvcc vanished): the candidate cannot be judged
            future.set_result(Measurement.failed("compile", f"compiler error: {exc}"))
            return
        if not result.ok:
            future.set_result(
                Measurement.failed("compile", result.error or "nvcc failed", compile_s=result.seconds,
                                   compile_cached=result.cached)  # fmt: skip
            )
            return
        self._queue.put(("evaluate", config, result, future, time.perf_counter()))

    def _feed(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            kind = item[0]
            future = item[3]
            try:
                self._start.wait()  # the worker comes up beside the first compiles: raises what stopped it
                if kind == "evaluate":
                    queued = time.perf_counter() - item[4]
                    measurement = self._evaluate(item[1], item[2])
                    measurement.queue_s = queued
                    future.set_result(measurement)
                else:
                    future.set_result(self._retime(item[1], item[2]))
            except BaseException as exc:  # DeviceError when the worker cannot be restarted
                future.set_exception(exc)

    def _shared_bytes(self, config: Config) -> int:
        steps = self.space.launches(config, self.shape, self.device)
        return max((s.shared_bytes for s in steps if isinstance(s, Launch)), default=0)

    def _evaluate(self, config: Config, compiled: CompileResult) -> Measurement:
        race_ms = self.race_line.threshold_ms() if self.race_line is not None else None
        reply = self._request("evaluate", {"config": config, "cubin": compiled.cubin, "race_ms": race_ms})
        if isinstance(reply, Measurement):
            measurement = reply
        else:
            measurement = Measurement.from_dict(reply[1])
            measurement.worker_restarted = reply[2]
        measurement.registers = compiled.registers
        measurement.spill_bytes = compiled.spill_bytes
        measurement.shared_bytes = compiled.shared_static + self._shared_bytes(config)
        measurement.compile_s = compiled.seconds
        measurement.compile_cached = compiled.cached
        if measurement.ok and measurement.evaluate_s:
            self._slowest_ok = max(self._slowest_ok, measurement.evaluate_s)
        if self.race_line is not None:
            self.race_line.offer(measurement)
        return measurement

    def retime(self, configs: Sequence[Config], rounds: int) -> list[Timing | None]:
        return [Timing.of(s) if s else None for s in self.retime_samples(configs, [rounds])]

    def retime_samples(self, configs: Sequence[Config], rounds: Sequence[int]) -> list[list[float] | None]:
        """Each configuration's samples of interleaved re-timing: one request of ``rounds[i]`` rounds per entry,
        each taken by whichever GPU of the queue is free (`MultiGpuEvaluator` splits the rounds over its GPUs),
        the samples pooled; None for a configuration that one of them could not run again."""
        compiled = [self.compiler.compile(self.space.template_for(c), self.space.compile_defines(c, self.shape))
                    for c in configs]
        items = [(c, r.cubin) for c, r in zip(configs, compiled) if r.ok]
        futures: list[Future[list[list[float] | None]]] = []
        for n in rounds:
            futures.append(Future())
            self._queue.put(("retime", items, n, futures[-1]))
        answers = iter(pool_shares([f.result() for f in futures], len(items)))
        return [next(answers) if r.ok else None for r in compiled]

    def _retime(self, items: list, rounds: int) -> list[list[float] | None]:
        if not items:
            return []
        # An evaluation times about max_reps runs; a retime runs rounds × len(items).
        scale = rounds * len(items) / max(1, self._start.setup.max_reps)  # set up: the feeder waited
        reply = self._request("retime", {"items": items, "rounds": rounds}, scale)
        if isinstance(reply, Measurement) or reply[0] != "retimed":
            return [None] * len(items)
        return [list(s) if s else None for s in reply[1]]

    def code_hash(self, config: Config) -> str | None:
        return self.compiler.code_hash(self.space.template_for(config), self.space.compile_defines(config, self.shape))

    def _feeding(self) -> bool:
        return getattr(self, "_feeder", None) is not None and self._feeder.is_alive()

    def _stop_feeding(self) -> None:
        if getattr(self, "_start", None) is not None:
            self._start.join()  # a worker still coming up is stopped or handed on only once it is
        if self._owns_queue and self._feeding():
            self._queue.put(None)
            self._feeder.join(60)

    def release_worker(self) -> "tuple[WorkerProcess, DeviceInfo] | None":
        """Stop feeding the worker and hand it over alive, for the next problem's evaluator (``started``, which
        sets it up again); None where it is gone. `close` then leaves it running."""
        self._stop_feeding()
        worker, self.worker = getattr(self, "worker", None), None
        if worker is None:
            return None
        if self._feeding() or not self._start.ready():  # mid-request, or never set up: not reusable
            worker.kill()
            return None
        return (worker, self.device) if worker.alive() else None

    def close(self) -> None:
        if getattr(self, "_start", None) is not None:
            self._start.cancel()  # a start still under way (Ctrl-C, a failed search) ends now, not after set-up
        self._stop_feeding()
        if getattr(self, "worker", None) is not None:
            self.worker.stop()
        if getattr(self, "compiler", None) is not None and self._owns_compiler:
            self.compiler.close()


def pool_shares(shares: list[list[list[float] | None]], count: int) -> list[list[float] | None]:
    """The samples of ``count`` configurations re-timed in several shares (requests), pooled per configuration;
    None for one that a share could not run again. A share that failed as a whole (its worker crashed and was
    restarted) is dropped: the others' rounds stand."""
    pooled: list[list[float] | None] = [[] for _ in range(count)]
    for share in shares:
        if count and all(samples is None for samples in share):
            continue
        for i, samples in enumerate(share):
            pooled[i] = None if samples is None or pooled[i] is None else pooled[i] + samples  # type: ignore[operator]
    return [samples or None for samples in pooled]
