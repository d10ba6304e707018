"""Every GPU of a host on one study: ``autotune search ... --devices all|0,1,...``.

    submit ─► one Compiler (nvcc pool, shared) ─► one queue ─┬─► feeder ─► worker on GPU 0
                                                             ├─► feeder ─► worker on GPU 1
                                                             └─► ...

Each GPU has its own `GpuEvaluator` (its own worker process, restarted on its own when a candidate crashes or
hangs it: the other GPUs go on); they share the compiler and the queue of compiled candidates, which the first
free GPU takes. Only GPUs of one model share a study: times of different models are not comparable, so
`device_groups` splits a selection by model and each group gets its own study.
"""

from __future__ import annotations

import queue
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Sequence

from autotune.device import DeviceInfo
from autotune.errors import DeviceError, InvalidArgument
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace
from autotune.tuning.evaluation.base import Evaluator, Measurement, Timing
from autotune.tuning.evaluation.process import WorkerProcess
from autotune.tuning.evaluation.racing import RaceLine

if TYPE_CHECKING:
    from autotune.tuning.evaluation.gpu import GpuEvaluator


def device_syntax(text: str) -> list[int] | None:
    """``--devices`` checked as text alone (no driver needed, so a typo is named even where there is no GPU):
    None for ``all``, else the ordinals named, each once."""
    if text.strip().lower() == "all":
        return None
    ordinals = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise InvalidArgument(f"--devices {text}: expected 'all' or GPU numbers like 0,1 (got {part!r})")
        ordinals.append(int(part))
    twice = sorted({o for o in ordinals if ordinals.count(o) > 1})
    if twice:
        raise InvalidArgument(f"--devices {text}: GPU {twice[0]} is named twice")
    return ordinals


def parse_devices(text: str, count: int) -> list[int]:
    """``all`` or comma-separated ordinals, checked against the ``count`` GPUs of this host."""
    ordinals = device_syntax(text)
    if count < 1:
        raise DeviceError("--devices: no CUDA GPU on this machine")
    if ordinals is None:
        return list(range(count))
    missing = [o for o in ordinals if o >= count]
    if missing:
        have = "GPU 0" if count == 1 else f"GPUs 0-{count - 1}"
        raise InvalidArgument(f"--devices {text}: no GPU {missing[0]}; this machine has {have}")
    return ordinals


def device_groups(ordinals: Sequence[int], names: Sequence[str]) -> list[list[int]]:
    """The ordinals grouped by GPU model (``names[i]`` is the model of ordinal ``ordinals[i]``), in order."""
    groups: dict[str, list[int]] = {}
    for ordinal, name in zip(ordinals, names):
        groups.setdefault(name, []).append(ordinal)
    return list(groups.values())


def host_devices(text: str) -> list[list[int]]:
    """``--devices`` on this host: checked, grouped by model (CUDA driver queries only, no context)."""
    from autotune.runtime import cuda_driver as cu

    device_syntax(text)  # before the driver: `--devices abc` is a typo, whether or not this machine has a GPU
    try:
        driver = cu.Driver.get()
        count = driver.device_count()
    except DeviceError:
        raise
    except Exception as exc:
        raise DeviceError(f"--devices: cannot query the CUDA driver: {exc}") from None
    ordinals = parse_devices(text, count)
    return device_groups(ordinals, [driver.device_name(driver.device(o)) for o in ordinals])


class MultiGpuEvaluator(Evaluator):
    """Several GPUs of one model behind one Evaluator: one study, shared compilation, one worker per GPU."""

    def __init__(self, space: KernelSpace, shape: Shape, ordinals: Sequence[int], **options: Any) -> None:
        from autotune.tuning.evaluation.gpu import GpuEvaluator

        if len(set(ordinals)) != len(ordinals) or not ordinals:
            raise InvalidArgument(f"--devices: expected distinct GPUs, got {list(ordinals)}")
        self._queue: "queue.Queue[tuple | None]" = queue.Queue()
        self.evaluators: list[GpuEvaluator] = []
        if options.get("racing", True):  # one race line: the fastest found on any GPU
            options["race_line"] = RaceLine()
        others = ordinals[1:]
        pool = ThreadPoolExecutor(max(1, len(others)), thread_name_prefix="gpu-start")
        # The other GPUs' worker processes start (import, CUDA context) while the first GPU's evaluator sets up.
        spawning = [pool.submit(_spawn, ordinal) for ordinal in others]
        try:
            # The first GPU's worker is set up alone: it builds the compiler (whose architecture its GPU names),
            # the validation kernel and the baseline, and writes the target shape's fp64 references to the disk
            # cache. The others are then set up side by side, each finding those cached: start-up costs about
            # two workers' time, not one per GPU (eight 8192³ set-ups in a row took minutes).
            first = GpuEvaluator(space, shape, device_ordinal=ordinals[0], work_queue=self._queue, **options)
            self.evaluators.append(first)
            first.wait_started()
            first.start_feeding()
            t_others = time.perf_counter()
            starting = [pool.submit(_set_up, spawned, space, shape, ordinal, self._queue, first.compiler, options)
                        for spawned, ordinal in zip(spawning, others)]  # fmt: skip
            wait(starting)
            others_s = time.perf_counter() - t_others
            for future in starting:  # every evaluator that started is kept (closed below if another failed)
                if future.exception() is None:
                    self.evaluators.append(future.result())
            failed = next((f.exception() for f in starting if f.exception() is not None), None)
            if failed is not None:
                raise failed
        except BaseException:
            wait(spawning)
            for future in spawning:  # workers spawned but never handed to an evaluator
                if future.exception() is None and not any(e.worker is future.result()[0] for e in self.evaluators):
                    future.result()[0].kill()
            self.close()
            raise
        finally:
            pool.shutdown(wait=True)
        names = {e.device.name for e in self.evaluators}
        if len(names) > 1:
            self.close()
            raise InvalidArgument(f"--devices: GPUs of different models ({', '.join(sorted(names))}) need their own studies")
        self.device = first.device
        self.toolchain = first.toolchain
        # The first GPU's phases; "others": the other GPUs' set-up after it, side by side (their wall time).
        self.startup = dict(first.startup, **first.beside, others=others_s)
        self.compiler = first.compiler  # shared; the first evaluator closes it

    @property  # type: ignore[override]
    def restarts(self) -> int:
        return sum(e.restarts for e in self.evaluators)

    def submit(self, config: Config) -> "Future[Measurement]":
        return self.evaluators[0].submit(config)  # compiled once, then taken by the first free GPU

    def retime(self, configs: Sequence[Config], rounds: int) -> list[Timing | None]:
        """The leaders side by side on every GPU, the rounds split evenly, each configuration's samples pooled:
        each one is timed as often on every card, so none gains from a faster one, in a quarter of the time on
        four (on four H200s the re-timing at 8192³ fp32 was a quarter of the search's wall)."""
        n = len(self.evaluators)
        split = [rounds // n + (i < rounds % n) for i in range(min(n, rounds))]
        samples = self.evaluators[0].retime_samples(configs, split)
        return [Timing.of(s) if s else None for s in samples]

    def code_hash(self, config: Config) -> str | None:
        return self.evaluators[0].code_hash(config)  # one compiler for every GPU

    def close(self) -> None:
        feeding = [e for e in self.evaluators if e._feeder is not None]
        for _ in feeding:  # one stop per feeder: each takes one and ends
            self._queue.put(None)
        for e in feeding:
            e._feeder.join(60)
        for e in reversed(self.evaluators):  # the first owns the shared compiler: closed last
            e.close()


def _spawn(ordinal: int) -> "tuple[WorkerProcess, DeviceInfo]":
    """A worker process for GPU ``ordinal``, started, and the device it reports."""
    worker = WorkerProcess(ordinal)
    return worker, worker.spawn()


def _set_up(spawned: "Future[tuple[WorkerProcess, DeviceInfo]]", space: KernelSpace, shape: Shape, ordinal: int,
            work_queue: "queue.Queue[tuple | None]", compiler: Any, options: dict) -> "GpuEvaluator":  # fmt: skip
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    evaluator = GpuEvaluator(space, shape, device_ordinal=ordinal, work_queue=work_queue, compiler=compiler,
                             started=spawned.result(), **options)  # fmt: skip
    try:
        evaluator.wait_started()
    except BaseException:
        evaluator.close()  # it never took from the shared queue: no feeder to stop
        raise
    evaluator.start_feeding()
    return evaluator
