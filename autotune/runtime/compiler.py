"""nvcc: template + defines → cubin for one GPU architecture, with a content-hash disk cache.

The cache key covers the template (and its includes), the defines, the architecture, nvcc's version and the
flags, so a hit is always the same machine code. Each entry keeps ptxas's resource report (registers, shared
memory, stack, spills) and the compile time. Failures are cached too: a config that does not compile will not
compile next time either. A compile stopped for taking too long is not: how long it takes depends on the load.

Compiles run as nvcc child processes fed by a thread pool, several at once, ahead of the GPU. A search gives its
compiler a `CompileDeadline`: a candidate whose nvcc runs far longer than the search's other compiles is stopped
and fails as "compile" (issue 24: on four GPUs one 14.9 s compile held a search for 9 s after its other 199
trials were measured).

With ``batch`` > 1, configurations of one template that wait for a free compile thread share one nvcc front end
(`autotune.runtime.compile_batch`), then get one ptxas each: the same cubins, fewer CPU-seconds. Nothing waits to
form a batch: a compile thread takes what is queued when it frees up, one configuration where only one waits.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Mapping

from autotune.errors import ToolchainError
from autotune.templates import template_hash, template_path

if TYPE_CHECKING:
    from autotune.runtime.compile_units import UnitCompiles

COMPILE_TIMEOUT_S = 300
# nvcc below normal priority: with a job per core it would otherwise take the CPU from the search's driver and the
# GPU worker, which then wait (issue 12: the driver ran at half its speed beside 16 compiles)
NICE = ["nice", "-n", "10"] if shutil.which("nice") else []
BASE_FLAGS = ("-cubin", "-O3", "-std=c++17", "-Xptxas", "-v")


def cache_root() -> Path:
    env = os.environ.get("AUTOTUNE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "autotune"


def find_nvcc() -> str:
    """Path of nvcc: $AUTOTUNE_NVCC, then PATH, then the usual CUDA locations."""
    env = os.environ.get("AUTOTUNE_NVCC")
    if env:  # an explicit choice is used or refused, never silently replaced
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise ToolchainError(f"AUTOTUNE_NVCC={env} is not an executable nvcc")
    for c in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise ToolchainError("nvcc not found: install the CUDA toolkit and put nvcc on PATH (or set AUTOTUNE_NVCC)")


@lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"cannot run {nvcc}: {exc}") from None
    match = re.search(r"release [0-9.]+, V([0-9.]+)", out)
    if not match:
        raise ToolchainError(f"{nvcc} does not look like nvcc (no version in its output)")
    return match.group(1)


@dataclass
class KernelResources:
    registers: int = 0
    shared_static: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0


@dataclass
class CompileResult:
    ok: bool
    key: str
    cubin: str | None = None  # path of the cubin in the cache
    error: str | None = None  # first error line, when not ok
    seconds: float = 0.0  # nvcc wall time of the compile that filled the cache entry
    cached: bool = False  # answered from the disk cache
    kernels: dict[str, KernelResources] = field(default_factory=dict)

    @property
    def registers(self) -> int:
        return max((k.registers for k in self.kernels.values()), default=0)

    @property
    def spill_bytes(self) -> int:
        return sum(k.spill_stores + k.spill_loads for k in self.kernels.values())

    @property
    def shared_static(self) -> int:
        return max((k.shared_static for k in self.kernels.values()), default=0)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "CompileResult":
        data = dict(data)
        data["kernels"] = {k: KernelResources(**v) for k, v in data.get("kernels", {}).items()}
        return cls(**data)


_ENTRY = re.compile(r"(?:Compiling entry function|Function properties for) '?([A-Za-z_][\w$]*)'?")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(log: str) -> dict[str, KernelResources]:
    """Per-kernel resources from ``nvcc -Xptxas -v`` output."""
    kernels: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    for line in log.splitlines():
        entry = _ENTRY.search(line)
        if entry:
            current = kernels.setdefault(entry.group(1), KernelResources())
            continue
        if current is None:
            continue
        props = _PROPS.search(line)
        if props:
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, props.groups())
        used = _USED.search(line)
        if used:
            current.registers = int(used.group(1))
            smem = _SMEM.search(line)
            current.shared_static = int(smem.group(1)) if smem else 0
    return kernels


class CompileDeadline:
    """How long one compile of a search may run: ``factor`` times the median of the search's finished compiles, and
    at least ``floor_s``; `COMPILE_TIMEOUT_S` until ``warmup`` compiles have finished. One watcher thread judges
    the running compiles against it every ``poll_s`` (the compiles' own threads wait on nvcc undisturbed), so a
    compile started in the first wave, before any median exists, is judged by the median once there is one.
    Thread-safe."""

    # The floor was 10 s first: on four H200s (call 4 of 2026-11-26c) the fp32 8192³ search then waited 4 s on the
    # 10 s stop of one compile (median 1.06 s) after its other 199 trials were measured.
    def __init__(self, factor: float = 5.0, floor_s: float = 3.0, warmup: int = 8, poll_s: float = 0.25) -> None:
        self.factor = factor
        self.floor_s = floor_s
        self.warmup = warmup
        self.poll_s = poll_s
        self._seconds: list[float] = []
        self._running: dict[subprocess.Popen, float] = {}  # compile → when it started
        self._stopped: set[subprocess.Popen] = set()
        self._watcher: threading.Thread | None = None
        self._lock = threading.Lock()
        self._ended = False  # `stop_all` was called: the search is over

    def record(self, seconds: float) -> None:
        """A compile of this search that finished (from nvcc, not the cache)."""
        with self._lock:
            self._seconds.append(seconds)

    def median(self) -> float | None:
        with self._lock:
            return statistics.median(self._seconds) if len(self._seconds) >= self.warmup else None

    def limit(self) -> float:
        median = self.median()
        if median is None:
            return COMPILE_TIMEOUT_S
        return min(COMPILE_TIMEOUT_S, max(self.floor_s, self.factor * median))

    def reason(self, seconds: float) -> str:
        if self._ended:
            return f"error: stopped after {seconds:.1f} s: the search had ended"
        median = self.median()
        if median is None:
            return f"error: nvcc ran over {seconds:.0f} s (the limit is {COMPILE_TIMEOUT_S} s)"
        return (f"error: nvcc ran over {seconds:.1f} s, {self.factor:g}x the median compile of this search "
                f"({median:.2f} s): stopped, not measured")  # fmt: skip

    def watch(self, proc: subprocess.Popen, started: float) -> None:
        """Judge ``proc`` (an nvcc in its own process group, started at ``started``) until `release`."""
        with self._lock:
            self._running[proc] = started
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="nvcc-deadline", daemon=True)
                self._watcher.start()

    def release(self, proc: subprocess.Popen) -> bool:
        """``proc`` has ended: whether the deadline stopped it."""
        with self._lock:
            self._running.pop(proc, None)
            stopped = proc in self._stopped
            self._stopped.discard(proc)
            return stopped

    def stop_all(self) -> None:
        """Stop every compile still running: the search is over, and what they compile was asked ahead of need
        (its compile threads, one per nvcc job, each held one)."""
        with self._lock:
            self._ended = True
            running = list(self._running)
            self._stopped.update(running)
            self._running.clear()
        for proc in running:
            _stop(proc)

    def _watch(self) -> None:
        while True:
            time.sleep(self.poll_s)
            limit, now = self.limit(), time.perf_counter()
            with self._lock:
                if not self._running:  # the next compile starts a new watcher
                    self._watcher = None
                    return
                late = [proc for proc, started in self._running.items() if now - started >= limit]
                for proc in late:
                    self._stopped.add(proc)
                    del self._running[proc]
            for proc in late:
                _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """Kill an nvcc and the cicc and ptxas it started (its process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_nvcc(cmd: list[str], deadline: CompileDeadline | None) -> tuple[int | None, str, float]:
    """Run one nvcc command to its end or its deadline: (return code, or None where stopped; output; seconds).
    nvcc runs in its own process group, so stopping it stops the cicc and ptxas it started."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip
    if deadline is not None:
        deadline.watch(proc, start)
    try:
        out, _ = proc.communicate(timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop(proc)
        proc.communicate()
        return None, "", time.perf_counter() - start
    finally:
        stopped = deadline.release(proc) if deadline is not None else False
    if stopped:
        return None, "", time.perf_counter() - start
    return proc.returncode, out, time.perf_counter() - start


def cubin_hash(cubin: bytes) -> str:
    """A cubin's identity: the sha256 of its bytes. nvcc writes the same bytes for the same machine code (measured:
    a comment edit of the template or of a header, another directory)."""
    return hashlib.sha256(cubin).hexdigest()


def first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line.lower():
            return line.strip()
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return lines[-1] if lines else "nvcc failed without a message"


class Compiler:
    """Compiles templates for one architecture; thread-safe; `submit` runs up to ``jobs`` nvcc at once."""

    def __init__(
        self,
        arch: str,
        *,
        cache_dir: Path | None = None,
        nvcc: str | None = None,
        flags: tuple[str, ...] = (),
        jobs: int | None = None,
        deadline: CompileDeadline | None = None,
        batch: int = 1,
    ) -> None:
        """``deadline``: stop a compile that runs far longer than the others (a search's compiler has one).
        ``batch``: configurations of one template that may share an nvcc front end (1: each its own nvcc)."""
        self.arch = arch
        self.deadline = deadline
        self.nvcc = nvcc or find_nvcc()
        self.version = nvcc_version(self.nvcc)
        self.flags = tuple(flags)
        self.cache_dir = (cache_dir or cache_root()) / "cubin"
        self.jobs = jobs or max(1, os.cpu_count() or 1)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()  # submitted from several threads (a search's, its worker's start)
        self.units: UnitCompiles | None = None
        if batch > 1:
            from autotune.runtime.compile_units import UnitCompiles

            self.units = UnitCompiles(self, batch)

    def key(self, template: str | Path, defines: Mapping[str, object]) -> str:
        text = json.dumps(
            {
                "template": template_hash(template),
                "defines": {k: str(v) for k, v in sorted(defines.items())},
                "arch": self.arch,
                "nvcc": self.version,
                "flags": list(BASE_FLAGS + self.flags),
            },
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def cached(self, key: str) -> CompileResult | None:
        """The cached result of the compile ``key`` names, if any (a damaged entry counts as none)."""
        report = (self.cache_dir / key[:2] / key).with_suffix(".json")
        if report.is_file():
            try:
                result = CompileResult.from_dict(json.loads(report.read_text()))
                if not result.ok or (result.cubin and Path(result.cubin).is_file()):
                    result.cached = True
                    return result
            except (ValueError, TypeError, KeyError):
                pass  # a damaged entry is rebuilt
        return None

    def gencode(self) -> str:
        virtual = self.arch.replace("sm_", "compute_")  # the -gencode form: sm_90a gets no plain sm_90 pass
        return f"-gencode=arch={virtual},code={self.arch}"

    def compile(self, template: str | Path, defines: Mapping[str, object]) -> CompileResult:
        key = self.key(template, defines)
        cached = self.cached(key)
        if cached is not None:
            return cached
        entry = self.cache_dir / key[:2] / key
        entry.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=entry.parent) as tmp:
            out = Path(tmp) / "k.cubin"
            return self.store(key, out, *self.nvcc_cubin(template, defines, out))

    def nvcc_cubin(self, template: str | Path, defines: Mapping[str, object],
                   out: Path) -> tuple[int | None, str, float]:  # fmt: skip
        """nvcc alone on one configuration, writing ``out``: (return code or None where stopped, log, seconds)."""
        cmd = [*NICE, self.nvcc, *BASE_FLAGS, self.gencode(), *self.flags]
        cmd += [f"-D{k}={v}" for k, v in sorted(defines.items())]
        return self.run([*cmd, "-o", str(out), str(template_path(template))], self.deadline)

    def run(self, cmd: list[str], deadline: CompileDeadline | None) -> tuple[int | None, str, float]:
        """`run_nvcc`, a missing tool as one `ToolchainError`."""
        try:
            return run_nvcc(cmd, deadline)
        except OSError as exc:
            raise ToolchainError(f"cannot run {cmd[len(NICE)]}: {exc}") from None

    def store(self, key: str, out: Path, code: int | None, log: str, seconds: float,
              timed: bool = True) -> CompileResult:  # fmt: skip
        """The result of a compile that wrote ``out`` (in a temporary folder beside the cache entry), cached;
        ``timed``: its seconds are a whole compile's, which the deadline's median may count."""
        if code is None:  # stopped: how long a compile takes depends on the load, so this is not cached
            limit = self.deadline.reason(seconds) if self.deadline else f"error: nvcc ran over {seconds:.0f} s"
            return CompileResult(ok=False, key=key, seconds=seconds, error=limit)
        entry = self.cache_dir / key[:2] / key
        ok = code == 0 and out.is_file()
        result = CompileResult(ok=ok, key=key, seconds=seconds, kernels=parse_ptxas(log))
        if ok:
            cubin = entry.with_suffix(".cubin")
            os.replace(out, cubin)
            result.cubin = str(cubin)
            if self.deadline is not None and timed:
                self.deadline.record(seconds)
        else:
            result.error = first_error(log)
        report = out.with_name(out.name + ".json")
        report.write_text(json.dumps(result.to_dict()))
        os.replace(report, entry.with_suffix(".json"))
        return result

    def code_hash(self, template: str | Path, defines: Mapping[str, object]) -> str | None:
        """The sha256 of the cubin (compiled, or from the cache): the machine code's identity, which a comment edit
        of the template does not change (`autotune.results.storage.CodeHash`); None where it does not compile."""
        result = self.compile(template, defines)
        return cubin_hash(Path(result.cubin).read_bytes()) if result.ok and result.cubin else None

    def submit(self, template: str | Path, defines: Mapping[str, object],
               varying: Collection[str] = ()) -> "Future[CompileResult]":  # fmt: skip
        """Compile in the pool. ``varying``: the defines in which configurations of this template differ (its
        tunables); with ``batch`` > 1, those that wait together share a front end where the template allows."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="nvcc")
            pool = self._pool
        defines = dict(defines)
        group = self.units.group(template, defines, varying) if self.units is not None and not self.flags else None
        key = self.key(template, defines) if group is not None else None
        if key is None or self.cached(key) is not None:
            return pool.submit(self.compile, template, defines)  # extra flags may be ptxas's: never in a unit
        future = self.units.wait(group, template, defines, key)  # type: ignore[union-attr,arg-type]
        pool.submit(self.units.take)  # type: ignore[union-attr]
        return future

    def close(self) -> None:
        if self.deadline is not None:  # a search's compiler: its compiles still running will not be measured
            self.deadline.stop_all()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self.units is not None:  # their compile threads were cancelled with the pool
            self.units.cancel_waiting()
