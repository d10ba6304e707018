"""The GPU worker's session: the CUDA context, a candidate's module and launch plan, and what a measurement is.

What a measurement means: the output buffers are poisoned with NaN; the launch plan runs on fresh random
inputs at each of the space's ragged validation shapes and at the target shape; every output element is
compared on the GPU with the float64 reference by relative norm (`OutputCheck`); only then is the plan timed,
with CUDA events around the launches, after a warm-up, with L2 flushed (a memset larger than twice the L2)
before each repetition (`EventTimer`), until ``min_time_ms`` of kernel time (``min_reps``…``max_reps``
repetitions); the median is the value and the quartiles are kept.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from autotune.device import DeviceInfo
from autotune.errors import DeviceError
from autotune.runtime.cuda_driver import Driver
from autotune.runtime.launch_plan import LaunchPlan
from autotune.spaces import space_class
from autotune.spaces.base import Config
from autotune.tuning.evaluation.base import Measurement, Timing
from autotune.tuning.evaluation.event_timer import EventTimer
from autotune.tuning.evaluation.output_check import CandidateFailed, OutputCheck
from autotune.tuning.evaluation.validation_data import DataSet, ValidationCases, target_dataset


@dataclass
class Setup:
    """What the parent (`GpuEvaluator`) sends the worker once: the space and problem, and how to measure."""

    space_ref: str
    shape: tuple[int, ...]
    seed: int
    dtype: str
    compare_cubin: str
    cache_dir: str
    flush_l2: bool = True
    baseline_config: dict | None = None  # see KernelSpace.baseline_config
    baseline_cubin: str | None = None
    min_time_ms: float = 25.0
    min_reps: int = 5
    max_reps: int = 100


class GpuSession:
    """The worker's CUDA context and what it measures with (see the module); one per worker process."""

    def __init__(self, setup: Setup, info: DeviceInfo, device_ordinal: int = 0) -> None:
        import pycuda.driver as cuda

        self.cuda = cuda
        self.setup = setup
        self.info = info
        self.device = cuda.Device(device_ordinal)
        self.context = self.device.retain_primary_context()
        self.context.push()
        self.stream = cuda.Stream()
        self.driver = Driver.get()  # launches go through the runtime's LaunchPlan, in the context pushed above
        self.space = space_class(setup.space_ref)(dtype=setup.dtype)
        self.shape = tuple(setup.shape)
        attrs = self.device.get_attributes()
        sm_count = attrs[cuda.device_attribute.MULTIPROCESSOR_COUNT]
        self.checker = OutputCheck(cuda, self.stream, setup.compare_cubin, sm_count)
        l2 = attrs.get(cuda.device_attribute.L2_CACHE_SIZE, 64 << 20)
        self.timer = EventTimer(cuda, self.stream, l2, setup.flush_l2, setup.max_reps)
        self.baseline = None  # (config, module) whose error sets the tolerances (`KernelSpace.baseline_config`)
        if setup.baseline_cubin:
            self.baseline = (setup.baseline_config, self._load(setup.baseline_cubin))
        self.target = target_dataset(cuda, setup, self.space, self.shape)
        self._calibrate(self.target)
        # Fresh inputs for the ragged validation shapes.
        self.cases = ValidationCases(cuda, self.space, np.random.default_rng(setup.seed + 1), self._calibrate)

    # --- launch plans ---------------------------------------------------------------------------------------
    def _plan(self, module: int, config: Config, data: DataSet) -> tuple[list[Callable[[], None]], list[Any]]:
        """Callables that enqueue the launch plan on the stream, and the workspace allocations to free. The plan
        is the runtime's own (`LaunchPlan`): what is timed here is what `autotune.load` later runs."""
        driver, cuda = self.driver, self.cuda
        workspace = self.space.workspace(config, data.shape)
        scratch = [cuda.mem_alloc(max(spec.nbytes, 4)) for spec in workspace.values()]
        names = [*data.buffers, *workspace]
        pointers = [int(alloc) for alloc, _ in data.buffers.values()] + [int(alloc) for alloc in scratch]
        sizes = {name: nbytes for name, (_, nbytes) in data.buffers.items()}
        sizes.update({name: spec.nbytes for name, spec in workspace.items()})
        functions: dict[str, int] = {}

        def function_of(kernel: str, shared_bytes: int) -> int:
            if kernel not in functions:
                functions[kernel] = driver.function(module, kernel)
            driver.prepare(functions[kernel], shared_bytes)
            return functions[kernel]

        try:
            plan = LaunchPlan(driver, self.space.launches(config, data.shape, self.info), function_of, names, sizes)
        except BaseException:
            self._free(scratch)
            raise
        stream = self.stream.handle
        return [lambda: plan.launch(pointers, stream)], scratch

    def _load(self, cubin: str) -> int:
        """A candidate's module, loaded into the worker's context (`_unload` it when done)."""
        return self.driver.load_module(Path(cubin).read_bytes())

    def _unload(self, module: int | None) -> None:
        if module is not None:
            try:
                self.driver.unload_module(module)
            except DeviceError:
                pass  # the context is broken; the worker is about to exit anyway

    def _run(self, steps: list[Callable[[], None]]) -> None:
        for step in steps:
            step()

    def _calibrate(self, data: DataSet) -> None:
        """Where the space ties its tolerance to a baseline configuration (fp32 GEMM: the SIMT kernel), run the
        baseline on these very inputs and set each output's tolerance from its error."""
        if self.baseline is None:
            return
        config, module = self.baseline
        steps, scratch = self._plan(module, config, data)
        try:
            self.checker.poison(data)
            self._run(steps)
            self.stream.synchronize()
            try:
                errors = self.checker.errors(data)
            except CandidateFailed as exc:
                raise RuntimeError(f"the baseline configuration failed: {exc.reason}") from None
        finally:
            self._free(scratch)
        for name, (rel, zero_ref, where) in errors.items():
            if not zero_ref:
                data.tolerances[name] = self.space.baseline_tolerance(name, rel, data.shape)

    def _validate(self, module: Any, config: Config, data: DataSet) -> tuple[float, list, list]:
        """Run once on poisoned outputs and check; returns (max rel error, steps, scratch) for reuse."""
        steps, scratch = self._plan(module, config, data)
        try:
            self.checker.poison(data)
            self._run(steps)
            self.stream.synchronize()
            return self.checker.check(data), steps, scratch
        except BaseException:
            self._free(scratch)
            raise

    def _free(self, allocations: list[Any]) -> None:
        for alloc in allocations:
            try:
                alloc.free()
            except self.cuda.Error:
                pass  # the context is broken; the worker is about to exit anyway

    # --- requests -------------------------------------------------------------------------------------------
    def evaluate(self, config: Config, cubin: str, race_ms: float | None = None) -> Measurement:
        """Validate, then time; ``race_ms``: the race line (`autotune.tuning.evaluation.racing`), None for none."""
        t0 = time.perf_counter()
        module = None
        scratch: list[Any] = []
        try:
            module = self._load(cubin)
            worst = 0.0
            for vshape, kind in self.space.validation_cases(self.shape):
                if self.space.violations(config, tuple(vshape), self.info):
                    continue  # e.g. a row cached in registers only fits rows up to some length
                data = self.cases.data(tuple(vshape), kind)
                err, _, vscratch = self._validate(module, config, data)
                self._free(vscratch)
                worst = max(worst, err)
            err, steps, scratch = self._validate(module, config, self.target)
            worst = max(worst, err)
            validated = time.perf_counter()
            # Estimate one run (warm, L2 flushed) to choose the repetitions.
            estimate = self.timer.time([steps], 1)[0][0]
            if race_ms is not None and estimate > race_ms:
                second = self.timer.time([steps], 1)[0][0]
                if second > race_ms:  # twice over the line: clearly slower than the leaders
                    return Measurement(
                        ok=True, timing=Timing.of([estimate, second]), max_rel_error=worst, raced=True,
                        evaluate_s=time.perf_counter() - t0, validate_s=validated - t0,
                    )
                estimate = min(estimate, second)
            s = self.setup
            reps = min(s.max_reps, max(s.min_reps, math.ceil(s.min_time_ms / max(estimate, 1e-3))))
            samples = self.timer.time([steps], reps)[0]
            return Measurement(
                ok=True, timing=Timing.of(samples), max_rel_error=worst, evaluate_s=time.perf_counter() - t0,
                validate_s=validated - t0,
            )
        finally:
            self._free(scratch)
            self._unload(module)

    def retime(self, items: list[tuple[Config, str]], rounds: int) -> list[list[float] | None]:
        """Each item's samples (ms) of ``rounds`` interleaved rounds; None for one that cannot be run again."""
        plans, keep, results = [], [], []
        index = []
        for config, cubin in items:
            module = None
            try:
                module = self._load(cubin)
                steps, scratch = self._plan(module, config, self.target)
                keep.append((module, scratch))
                index.append(len(plans))
                plans.append(steps)
            except (self.cuda.Error, DeviceError):
                self._unload(module)
                index.append(None)
        try:
            samples = self.timer.time(plans, rounds) if plans else []
        finally:
            for module, scratch in keep:
                self._free(scratch)
                self._unload(module)
        for i in index:
            results.append(None if i is None else samples[i])
        return results

    def close(self) -> None:
        """Free what the session holds on the GPU and leave the context stack empty (pycuda aborts the process at
        exit otherwise). A worker set up again for the next shape (`worker`) must not hold two problems' data."""
        for data in (getattr(self, "cases", None), getattr(self, "target", None)):
            if data is not None:
                data.free()
        baseline = getattr(self, "baseline", None)
        if baseline is not None:
            self._unload(baseline[1])
        # The cases hold a bound method of the session: dropped, nothing keeps the timer's and checker's buffers.
        self.cases = self.target = self.baseline = self.timer = self.checker = None
        try:
            self.context.pop()
        except Exception:
            pass

    def healthy(self) -> bool:
        """Whether the context still works: a synchronize and a tiny memset (of the checker's flag) succeed."""
        try:
            self.context.synchronize()
            self.cuda.memset_d8(self.checker.bad, 0, 8)
            self.context.synchronize()
            return True
        except self.cuda.Error:
            return False
