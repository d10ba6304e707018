"""GpuEvaluator: nvcc in parallel ahead of the GPU, then one GPU worker process that validates and times.

    submit(config) ─► Compiler (nvcc pool) ─► queue ─► feeder thread ─► worker process (pycuda)
                      │ far slower than the search's            │ timeout: kill + restart, trial fails "timeout"
                      │ other compiles: stopped, "compile"      │ worker died / sticky CUDA error: restart, "crash"
                                                                │ clearly slower than the leaders: timed twice only

The compile deadline is `autotune.runtime.compiler.CompileDeadline`, the race line
`autotune.tuning.evaluation.racing.RaceLine` (shared by every GPU of a search).

A candidate never raises: every outcome is a `Measurement`. Only a worker that cannot start at all (no GPU,
no pycuda) raises `DeviceError`, since no search can go on then.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Sequence

from autotune.device import DeviceInfo
from autotune.errors import DeviceError, InvalidArgument
from autotune.runtime.compiler import CompileDeadline, Compiler, CompileResult, cache_root
from autotune.shape import Shape, format_shape
from autotune.spaces.base import Config, KernelSpace, Launch
from autotune.tuning.evaluation.base import Evaluator, Measurement, Timing, Toolchain
from autotune.tuning.evaluation.gpu_session import Setup
from autotune.tuning.evaluation.process import WorkerProcess
from autotune.tuning.evaluation.racing import RaceLine

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

        # The worker tells us which GPU this is; only then do we know the architecture to compile for.
        t0 = time.perf_counter()
        if started is not None:
            self.worker, self.device = started
        else:
            self.worker = WorkerProcess(device_ordinal)
            self.device = self.worker.spawn()
        t_spawned = time.perf_counter()
        try:
            self._prepare(space, seed, flush_l2, min_time_ms, max_reps, jobs, cache_dir, compiler, compile_batch)
            t_built = time.perf_counter()
            self._set_up_worker(handed_on=started is not None)
        except BaseException:
            self.worker.kill()  # taken from a handoff or spawned here: nobody else would stop it
            raise
        # Where the start-up went, before any candidate (`Profile.startup`; issue 23 asks for it to shrink).
        self.startup = {"worker": t_spawned - t0, "build": t_built - t_spawned, "setup": time.perf_counter() - t_built}

        self._queue: "queue.Queue[tuple | None]" = work_queue if work_queue is not None else queue.Queue()
        self._feeder = threading.Thread(target=self._feed, name="gpu-feeder", daemon=True)
        self._feeder.start()

    def _prepare(self, space: KernelSpace, seed: int, flush_l2: bool, min_time_ms: float, max_reps: int,
                 jobs: int | None, cache_dir: Path | None, compiler: Compiler | None, compile_batch: int) -> None:
        """The compiler, the checkers' cubins and the worker's `Setup`, once the device is known."""
        needed = space.device_bytes(space.default_config, self.shape)
        if needed > 0.9 * self.device.total_memory:
            raise InvalidArgument(
                f"shape {format_shape(self.shape)} needs {needed / 2**30:.1f} GiB of GPU memory; "
                f"{self.device.name} has {self.device.total_memory / 2**30:.1f} GiB"
            )
        self.compiler = compiler or Compiler(self.device.compile_arch, cache_dir=cache_dir, jobs=jobs,
                                             deadline=CompileDeadline(), batch=compile_batch)  # fmt: skip
        self.toolchain = Toolchain(nvcc=self.compiler.version, flags=list(self.compiler.flags))
        baseline = space.baseline_config()
        compare_cubin, baseline_cubin = build_checkers(self.compiler, space, self.shape, baseline)
        self._setup = Setup(
            space_ref=type(space).ref(),
            shape=self.shape,
            seed=seed,
            dtype=space.dtype,
            compare_cubin=compare_cubin,
            cache_dir=str(self._cache_dir),
            flush_l2=flush_l2,
            baseline_config=baseline,
            baseline_cubin=baseline_cubin,
            min_time_ms=min_time_ms,
            max_reps=max_reps,
        )

    def _set_up_worker(self, handed_on: bool) -> None:
        """Send the worker its set-up. A handed-on worker that cannot take it (it died since, or its last
        problem left it unable) is replaced by a fresh one, once: a new process would have been started anyway."""
        try:
            self.worker.configure(self._setup)
        except (DeviceError, OSError):  # OSError: the pipe of a worker that has died
            if not handed_on:
                raise
            self.worker.kill()
            self.worker = WorkerProcess(self.device_ordinal)
            self.worker.spawn()
            self.worker.configure(self._setup)

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
        scale = rounds * len(items) / max(1, self._setup.max_reps)
        reply = self._request("retime", {"items": items, "rounds": rounds}, scale)
        if isinstance(reply, Measurement) or reply[0] != "retimed":
            return [None] * len(items)
        return [list(s) if s else None for s in reply[1]]

    def code_hash(self, config: Config) -> str | None:
        return self.compiler.code_hash(self.space.template_for(config), self.space.compile_defines(config, self.shape))

    def _stop_feeding(self) -> None:
        if getattr(self, "_queue", None) is not None and self._owns_queue and self._feeder.is_alive():
            self._queue.put(None)
            self._feeder.join(60)

    def release_worker(self) -> "tuple[WorkerProcess, DeviceInfo] | None":
        """Stop feeding the worker and hand it over alive, for the next problem's evaluator (``started``, which
        sets it up again); None where it is gone. `close` then leaves it running."""
        self._stop_feeding()
        worker, self.worker = getattr(self, "worker", None), None
        if worker is None:
            return None
        if self._feeder.is_alive():  # still inside a request: its answer would meet the next set-up
            worker.kill()
            return None
        return (worker, self.device) if worker.alive() else None

    def close(self) -> None:
        self._stop_feeding()
        if getattr(self, "worker", None) is not None:
            self.worker.stop()
        if getattr(self, "compiler", None) is not None and self._owns_compiler:
            self.compiler.close()


class WorkerHandoff:
    """GPU workers kept between the searches of one command (the buckets of a range, the shapes of a list): the
    next search's evaluator takes this GPU's worker and sets it up for its problem, instead of starting a process
    (`autotune.tuning.tune`'s ``handoff``). `close` stops those still kept."""

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


def build_checkers(compiler: Compiler, space: KernelSpace, shape: Shape,
                   baseline: Config | None) -> tuple[str, str | None]:  # fmt: skip
    """The cubins of the validation kernel and of the baseline configuration that sets tolerances (None without
    one), compiled side by side (one nvcc's time, not two, before a search); `DeviceError` if either fails."""
    compare_job = compiler.submit(Path(__file__).with_name("compare.cu"), {})
    baseline_job = None
    if baseline is not None:
        baseline_job = compiler.submit(space.template_for(baseline), space.compile_defines(baseline, shape))
    compare = compare_job.result()
    if not compare.ok or not compare.cubin:
        raise DeviceError(f"cannot build the validation kernel: {compare.error}")
    if baseline_job is None:
        return compare.cubin, None
    built = baseline_job.result()
    if not built.ok or not built.cubin:
        raise DeviceError(f"cannot build the baseline configuration that sets tolerances: {built.error}")
    return compare.cubin, built.cubin


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
