"""The GPU worker process: owns the CUDA context, validates and times the candidates it is sent.

It runs in its own process so that a candidate that faults (the context is then unusable) or hangs takes down
only the worker; the parent (`GpuEvaluator`) records the failure and starts a new one.

Protocol over a multiprocessing connection, pickled tuples:

    worker → parent   ("device", DeviceInfo dict)          once started
    parent → worker   ("setup", Setup dict)
    worker → parent   ("ready", None) | ("fatal", one-line message)
    parent → worker   ("evaluate", {"config", "cubin"})     → ("result", Measurement dict, sticky)
                      ("retime", {"items": [(config, cubin)], "rounds"}) → ("retimed", [Timing dict | None], sticky)
                      ("stop", None)

``sticky`` means the context is broken (illegal address, …): the worker exits after answering.

What a measurement means: the output buffers are poisoned with NaN; the launch plan runs on fresh random
inputs at each of the space's ragged validation shapes and at the target shape; every output element is
compared on the GPU with the float64 reference by relative norm; only then is the plan timed, with CUDA events
around the launches, after a warm-up, with L2 flushed (a memset larger than twice the L2) before each
repetition, until ``min_time_ms`` of kernel time (``min_reps``…``max_reps`` repetitions); the median is the
value and the quartiles are kept.
"""

from __future__ import annotations

import hashlib
import math
import os
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import DeviceError
from autotune.runtime.cuda_driver import Driver
from autotune.runtime.launch_plan import LaunchPlan
from autotune.shape import format_shape
from autotune.spaces import space_class
from autotune.spaces.base import UNIFORM, BufferSpec, Config, KernelSpace
from autotune.tuning.evaluation.base import Measurement, Timing

DEFAULT_SMEM_LIMIT = 48 * 1024  # dynamic shared memory above this needs an opt-in attribute
REFERENCE_CACHE_LIMIT = 2 << 30  # bytes of fp64 reference worth keeping on disk
_TOLERANCE = "__tolerance__"  # prefix of the tolerances kept beside the references in the cache file
CASE_REUSE = 8  # candidates checked on one validation case's data before it is drawn again


@dataclass
class Setup:
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


# Substrings of CUDA error messages after which the context cannot be used again.
_STICKY = (
    "illegal",
    "misaligned",
    "unspecified launch failure",
    "exception",
    "hardware stack error",
    "trap",
    "assert",
    "launch timed out",
    "context is destroyed",
    "not permitted",
)
_LAUNCH = ("too many resources", "out of resources", "invalid argument", "invalid value", "no binary",
           "invalid image", "invalid ptx", "unsupported", "shared object", "not found")  # fmt: skip


def classify_cuda_error(message: str) -> tuple[str, bool]:
    """(failure kind, sticky) for a CUDA error message."""
    m = message.lower()
    if any(s in m for s in _STICKY):
        return "crash", True
    if any(s in m for s in _LAUNCH):
        return "launch", False
    return "crash", True  # unknown: assume the worst, the parent restarts the worker


class DataSet:
    """Inputs, poisoned outputs and fp64 references of one shape, on the device. ``inputs`` are host arrays in
    the buffers' dtypes; ``tolerances`` per output (`KernelSpace.tolerances`)."""

    def __init__(self, cuda: Any, space: KernelSpace, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                 refs: dict[str, np.ndarray], tolerances: dict[str, float], kind: str = UNIFORM) -> None:  # fmt: skip
        self.shape = shape
        self.kind = kind
        self.buffers: dict[str, tuple[Any, int]] = {}
        self.host_inputs = {name: np.ascontiguousarray(array) for name, array in inputs.items()}
        for name, array in self.host_inputs.items():
            self.buffers[name] = (cuda.to_device(array), array.nbytes)
        self.outputs: dict[str, BufferSpec] = space.outputs(shape)
        self.refs: dict[str, Any] = {}
        for name, spec in self.outputs.items():
            self.buffers[name] = (cuda.mem_alloc(max(spec.nbytes, 4)), spec.nbytes)
            ref = np.ascontiguousarray(refs[name], dtype=np.float64)
            if ref.size != int(np.prod(spec.shape)):
                raise ValueError(f"reference {name} has {ref.size} elements, output has {int(np.prod(spec.shape))}")
            self.refs[name] = cuda.to_device(ref)
        self.tolerances = dict(tolerances)
        self.zero_tolerances = {name: space.zero_tolerance(name, shape) for name in self.outputs}

    def reload_inputs(self, cuda: Any) -> None:
        """Copy the inputs to the device again (synchronously, from pageable memory): a candidate that wrote
        into them (out of bounds) cannot change what the next one is checked on."""
        for name, array in self.host_inputs.items():
            cuda.memcpy_htod(self.buffers[name][0], array)

    def free(self) -> None:
        for alloc, _ in self.buffers.values():
            alloc.free()
        for alloc in self.refs.values():
            alloc.free()
        self.buffers.clear()
        self.refs.clear()


class CandidateFailed(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class GpuSession:
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
        self.rng = np.random.default_rng(setup.seed + 1)  # fresh inputs for the ragged validation shapes

        compare_module = cuda.module_from_file(setup.compare_cubin)
        self.compares: dict[str, Any] = {}
        for name in dtypes.DTYPES:
            function = compare_module.get_function(f"compare_{dtypes.dtype(name).short}_f64")
            function.prepare("PPQPP")
            self.compares[name] = function
        self._compare_module = compare_module
        self.sums = cuda.mem_alloc(16)
        self.bad = cuda.mem_alloc(8)
        attrs = self.device.get_attributes()
        self.sm_count = attrs[cuda.device_attribute.MULTIPROCESSOR_COUNT]
        l2 = attrs.get(cuda.device_attribute.L2_CACHE_SIZE, 64 << 20)
        self.flush_words = max(2 * l2, 64 << 20) // 4
        self.flush = cuda.mem_alloc(self.flush_words * 4) if setup.flush_l2 else None
        self.events = [(cuda.Event(), cuda.Event()) for _ in range(max(setup.max_reps, 64))]
        self.baseline = None  # (config, module) whose error sets the tolerances (`KernelSpace.baseline_config`)
        if setup.baseline_cubin:
            self.baseline = (setup.baseline_config, self._load(setup.baseline_cubin))
        self.target = self._target_dataset()
        self._calibrate(self.target)
        self._cases: dict[tuple, tuple[DataSet, int]] = {}  # (shape, kind) → (validation data, candidates left)

    # --- data -----------------------------------------------------------------------------------------------
    def _reference_cache(self) -> Path:
        module_file = Path(sys.modules[type(self.space).__module__].__file__ or "")
        text = f"{self.setup.space_ref}|{self.setup.dtype}|{format_shape(self.shape)}|{self.setup.seed}|"
        digest = hashlib.sha256(text.encode() + module_file.read_bytes()).hexdigest()[:32]
        return Path(self.setup.cache_dir) / "reference" / f"{digest}.npz"

    def _target_dataset(self) -> DataSet:
        rng = np.random.default_rng(self.setup.seed)
        inputs = self.space.inputs(self.shape, rng)
        path = self._reference_cache()
        refs = tolerances = None
        if path.is_file():
            try:
                with np.load(path) as data:
                    refs = {k: data[k] for k in data.files if not k.startswith(_TOLERANCE)}
                    tolerances = {k[len(_TOLERANCE):]: float(data[k]) for k in data.files if k.startswith(_TOLERANCE)}
            except (OSError, ValueError):
                refs = None
        if refs is None or tolerances is None:
            decoded = self.space.decoded_inputs(inputs, self.shape)
            refs = self.space.reference(decoded, self.shape)
            tolerances = self.space.tolerances(decoded, refs, self.shape)
            del decoded
            if sum(r.nbytes for r in refs.values()) <= REFERENCE_CACHE_LIMIT:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
                np.savez(tmp, **refs, **{_TOLERANCE + k: np.float64(v) for k, v in tolerances.items()})
                os.replace(tmp, path)
        return DataSet(self.cuda, self.space, self.shape, inputs, refs, tolerances)

    def _fresh_dataset(self, shape: tuple[int, ...], kind: str = UNIFORM) -> DataSet:
        inputs = self.space.inputs(shape, self.rng) if kind == UNIFORM else self.space.inputs(shape, self.rng, kind)
        decoded = self.space.decoded_inputs(inputs, shape)
        refs = self.space.reference(decoded, shape)
        return DataSet(self.cuda, self.space, shape, inputs, refs, self.space.tolerances(decoded, refs, shape), kind)

    def _case_data(self, shape: tuple[int, ...], kind: str) -> DataSet:
        """The data of one validation case, with its tolerances calibrated: fresh (new random inputs, fp64
        references on the host) every `CASE_REUSE` candidates instead of for each — the host reference of the
        61x70x16384 GEMM case alone took ~66 ms, most of a candidate's validation (issue 12) — and its inputs
        copied to the device again for every candidate."""
        key = (shape, kind)
        data, left = self._cases.get(key, (None, 0))
        if data is None or left <= 0:
            if data is not None:
                data.free()
                del self._cases[key]
            data = self._fresh_dataset(shape, kind)
            try:
                self._calibrate(data)
            except BaseException:
                data.free()
                raise
            left = CASE_REUSE
        else:
            data.reload_inputs(self.cuda)
        self._cases[key] = (data, left - 1)
        return data

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
            if shared_bytes > DEFAULT_SMEM_LIMIT:
                driver.set_max_dynamic_shared(functions[kernel], shared_bytes)
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

    def _check(self, data: DataSet) -> float:
        """Compare every output with its reference; raise CandidateFailed; return the largest relative error."""
        worst = 0.0
        for name, (rel, zero_ref, where) in self._errors(data).items():
            limit = data.zero_tolerances[name] if zero_ref else data.tolerances[name]
            if not rel <= limit:
                what = "RMS error (zero reference)" if zero_ref else "relative error"
                raise CandidateFailed("wrong", f"{where}: {what} {rel:.2e} > {limit:.1e}")
            worst = max(worst, rel)
        return worst

    def _errors(self, data: DataSet) -> dict[str, tuple[float, bool, str]]:
        """Per output: (relative error, or RMS error where the reference is all zero; whether it is; where).
        Raises CandidateFailed for NaN/inf where the reference is finite."""
        cuda = self.cuda
        errors = {}
        for name, spec in data.outputs.items():
            n = int(np.prod(spec.shape))
            cuda.memset_d8_async(self.sums, 0, 16, self.stream)
            cuda.memset_d8_async(self.bad, 0, 8, self.stream)
            blocks = max(1, min(math.ceil(n / 256), self.sm_count * 8))
            out, _ = data.buffers[name]
            self.compares[spec.dtype].prepared_async_call(
                (blocks, 1), (256, 1, 1), self.stream,
                int(out), int(data.refs[name]), np.uint64(n), int(self.sums), int(self.bad),
            )  # fmt: skip
            sums = np.empty(2, np.float64)
            bad = np.empty(1, np.uint64)
            cuda.memcpy_dtoh_async(sums, self.sums, self.stream)
            cuda.memcpy_dtoh_async(bad, self.bad, self.stream)
            self.stream.synchronize()
            where = f"{name} at {format_shape(data.shape)}" + ("" if data.kind == UNIFORM else f" ({data.kind} inputs)")
            if bad[0]:
                raise CandidateFailed(
                    "nan", f"{where}: {int(bad[0])} of {n} elements NaN/inf (not written, or overflow)"
                )
            if sums[1] > 0:
                errors[name] = (math.sqrt(sums[0] / sums[1]), False, where)
            else:  # the reference is exactly zero: an absolute bound
                errors[name] = (math.sqrt(sums[0] / max(n, 1)), True, where)
        return errors

    def _calibrate(self, data: DataSet) -> None:
        """Where the space ties its tolerance to a baseline configuration (fp32 GEMM: the SIMT kernel), run the
        baseline on these very inputs and set each output's tolerance from its error."""
        if self.baseline is None:
            return
        config, module = self.baseline
        steps, scratch = self._plan(module, config, data)
        try:
            self._poison(data)
            self._run(steps)
            self.stream.synchronize()
            try:
                errors = self._errors(data)
            except CandidateFailed as exc:
                raise RuntimeError(f"the baseline configuration failed: {exc.reason}") from None
        finally:
            self._free(scratch)
        for name, (rel, zero_ref, where) in errors.items():
            if not zero_ref:
                data.tolerances[name] = self.space.baseline_tolerance(name, rel, data.shape)

    def _poison(self, data: DataSet) -> None:
        for name, spec in data.outputs.items():
            alloc, _ = data.buffers[name]
            d = dtypes.dtype(spec.dtype)
            n = int(np.prod(spec.shape))
            if d.itemsize == 4:
                self.cuda.memset_d32_async(alloc, d.poison, n, self.stream)
            else:
                self.cuda.memset_d16_async(alloc, d.poison, n, self.stream)

    def _validate(self, module: Any, config: Config, data: DataSet) -> tuple[float, list, list]:
        """Run once on poisoned outputs and check; returns (max rel error, steps, scratch) for reuse."""
        steps, scratch = self._plan(module, config, data)
        try:
            self._poison(data)
            self._run(steps)
            self.stream.synchronize()
            return self._check(data), steps, scratch
        except BaseException:
            self._free(scratch)
            raise

    def _free(self, allocations: list[Any]) -> None:
        for alloc in allocations:
            try:
                alloc.free()
            except self.cuda.Error:
                pass  # the context is broken; the worker is about to exit anyway

    def _time(self, plans: list[list[Callable[[], None]]], reps: int) -> list[list[float]]:
        """Event-timed repetitions of each plan, interleaved; L2 flushed before each."""
        cuda, stream = self.cuda, self.stream
        samples: list[list[float]] = [[] for _ in plans]
        while len(self.events) < len(plans):
            self.events.append((cuda.Event(), cuda.Event()))
        pairs_per_round = len(plans)
        rounds_per_sync = max(1, len(self.events) // pairs_per_round)
        done = 0
        while done < reps:
            batch = min(rounds_per_sync, reps - done)
            used = []
            for r in range(batch):
                order = list(range(len(plans)))
                shift = (done + r) % len(plans)
                order = order[shift:] + order[:shift]  # rotate: no plan always runs first
                for i in order:
                    start, end = self.events[len(used)]
                    if self.flush is not None:
                        cuda.memset_d32_async(self.flush, 0, self.flush_words, stream)
                    start.record(stream)
                    self._run(plans[i])
                    end.record(stream)
                    used.append((i, start, end))
            used[-1][2].synchronize()
            for i, start, end in used:
                samples[i].append(end.time_since(start))
            done += batch
        return samples

    # --- requests -------------------------------------------------------------------------------------------
    def evaluate(self, config: Config, cubin: str) -> Measurement:
        t0 = time.perf_counter()
        module = None
        scratch: list[Any] = []
        try:
            module = self._load(cubin)
            worst = 0.0
            for vshape, kind in self.space.validation_cases(self.shape):
                if self.space.violations(config, tuple(vshape), self.info):
                    continue  # e.g. a row cached in registers only fits rows up to some length
                data = self._case_data(tuple(vshape), kind)
                err, _, vscratch = self._validate(module, config, data)
                self._free(vscratch)
                worst = max(worst, err)
            err, steps, scratch = self._validate(module, config, self.target)
            worst = max(worst, err)
            validated = time.perf_counter()
            # Estimate one run (warm, L2 flushed) to choose the repetitions.
            estimate = self._time([steps], 1)[0][0]
            s = self.setup
            reps = min(s.max_reps, max(s.min_reps, math.ceil(s.min_time_ms / max(estimate, 1e-3))))
            samples = self._time([steps], reps)[0]
            return Measurement(
                ok=True, timing=Timing.of(samples), max_rel_error=worst, evaluate_s=time.perf_counter() - t0,
                validate_s=validated - t0,
            )
        finally:
            self._free(scratch)
            self._unload(module)

    def retime(self, items: list[tuple[Config, str]], rounds: int) -> list[Timing | None]:
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
            samples = self._time(plans, rounds) if plans else []
        finally:
            for module, scratch in keep:
                self._free(scratch)
                self._unload(module)
        for i in index:
            results.append(None if i is None else Timing.of(samples[i]))
        return results

    def close(self) -> None:
        """Leave the context stack empty (pycuda aborts the process at exit otherwise)."""
        for data, _ in getattr(self, "_cases", {}).values():
            try:
                data.free()
            except Exception:
                pass
        try:
            self.context.pop()
        except Exception:
            pass

    def healthy(self) -> bool:
        try:
            self.context.synchronize()
            self.cuda.memset_d8(self.bad, 0, 8)
            self.context.synchronize()
            return True
        except self.cuda.Error:
            return False


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main(conn: Any, device_ordinal: int = 0) -> None:
    """Entry point of the worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        from autotune.device import query_device

        info = query_device(device_ordinal)
        import pycuda.driver  # noqa: F401  (the worker measures through pycuda)
    except ImportError as exc:
        conn.send(("fatal", f"pycuda is not installed ({exc}); on a GPU machine: pip install 'autotune[cuda]'"))
        return
    except Exception as exc:
        conn.send(("fatal", str(exc)))
        return
    conn.send(("device", info.to_dict()))
    try:
        kind, payload = conn.recv()
    except EOFError:
        return
    if kind != "setup":
        return
    try:
        session = GpuSession(Setup(**payload), info, device_ordinal)
    except Exception as exc:
        conn.send(("fatal", f"GPU worker setup failed: {_one_line(exc)}"))
        try:
            import pycuda.driver as cuda

            while cuda.Context.get_current() is not None:
                cuda.Context.pop()
        except Exception:
            pass
        return
    conn.send(("ready", None))
    try:
        _serve(conn, session)
    finally:
        session.close()


def _serve(conn: Any, session: GpuSession) -> None:
    cuda = session.cuda
    while True:
        try:
            kind, payload = conn.recv()
        except EOFError:
            return
        if kind == "stop":
            return
        sticky = False
        try:
            if kind == "evaluate":
                answer: Any = asdict(session.evaluate(payload["config"], payload["cubin"]))
            elif kind == "retime":
                timings = session.retime(payload["items"], payload["rounds"])
                answer = [asdict(t) if t else None for t in timings]
            else:
                raise ValueError(f"unknown request {kind!r}")
        except CandidateFailed as failure:
            answer = asdict(Measurement.failed(failure.kind, failure.reason))
        except (cuda.Error, DeviceError) as exc:
            failure_kind, sticky = classify_cuda_error(str(exc))
            if not sticky and not session.healthy():
                failure_kind, sticky = "crash", True
            answer = asdict(Measurement.failed(failure_kind, _one_line(exc)))
        except Exception as exc:  # a bug in autotune or in a space: report it, and start afresh
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(tb.filename).name}:{tb.lineno}"
            answer = asdict(Measurement.failed("worker", f"{_one_line(exc)} at {where}"))
            sticky = not session.healthy()
        reply = "retimed" if kind == "retime" and isinstance(answer, list) else "result"
        conn.send((reply, answer, sticky))
        if sticky:
            return


def _watch_parent(parent: int) -> None:
    """Exit when the parent is gone (killed): a worker stuck in a hung kernel would otherwise stay behind."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def _entry(argv: list[str]) -> None:
    """``python -m autotune.tuning.evaluation.worker --fd N --device D`` (see autotune.tuning.evaluation.process)."""
    import argparse
    import threading
    from multiprocessing.connection import Connection

    parser = argparse.ArgumentParser(prog="autotune.tuning.evaluation.worker")
    parser.add_argument("--fd", type=int, required=True, help="this end of the socket pair to the parent")
    parser.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    args = parser.parse_args(argv)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="parent-watch", daemon=True).start()
    conn = Connection(args.fd)
    try:
        main(conn, args.device)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent went away mid-answer
    finally:
        conn.close()


if __name__ == "__main__":
    _entry(sys.argv[1:])
