"""Configurations that wait for a compile thread, compiled several to one nvcc front end where their template allows
(`autotune.runtime.compile_batch` builds the unit and splits its PTX; `Compiler` owns the threads and the cache).

A compile thread takes the oldest waiting configuration and up to ``size`` - 1 others of its group (the same
template and the same defines but for the tunables): nothing waits to form a unit, so where one configuration waits
it compiles alone. A group is compiled alone from then on where its unit cannot give each configuration the cubin
nvcc gives it alone: its headers cannot be listed, a split module is not faithful, the unit never compiles while its
configurations do, or its first unit's first cubin is not byte for byte the one nvcc writes alone (checked once per
group: cicc may compile a kernel otherwise inside a larger unit, as with one attention template).
"""

from __future__ import annotations

import os
import tempfile
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Mapping

from autotune.errors import AutotuneError
from autotune.runtime import compile_batch
from autotune.runtime.compiler import NICE, CompileResult
from autotune.templates import template_path

if TYPE_CHECKING:
    from autotune.runtime.compiler import Compiler


@dataclass
class _Job:
    group: tuple
    template: str | Path
    defines: dict[str, object]
    key: str  # its cache key (`Compiler.key`), computed once
    future: "Future[CompileResult]"


class UnitCompiles:
    """The waiting configurations of one `Compiler` and what it learned of their groups (see the module)."""

    def __init__(self, compiler: "Compiler", size: int) -> None:
        self.compiler = compiler
        self.size = size
        self._waiting: list[_Job] = []
        self._lock = threading.Lock()
        self._headers: dict[tuple, list[str]] = {}
        self.alone: set[tuple] = set()  # groups compiled alone from now on
        self._checked: set[tuple] = set()  # groups whose first unit gave nvcc's own cubin

    def group(self, template: str | Path, defines: Mapping[str, object], varying: Collection[str]) -> tuple | None:
        """What a configuration must share with others to be compiled with them (None: it is compiled alone)."""
        if not varying:
            return None
        try:
            path = template_path(template)
            if not compile_batch.layout_of(Path(path)).batchable(varying, defines):
                return None
        except (AutotuneError, OSError):  # a missing template or header: the compile alone says so, in its result
            return None
        group = (str(path), tuple(sorted((k, str(v)) for k, v in defines.items() if k not in varying)))
        return None if group in self.alone else group

    def wait(self, group: tuple, template: str | Path, defines: dict[str, object],
             key: str) -> "Future[CompileResult]":  # fmt: skip
        future: Future[CompileResult] = Future()
        with self._lock:
            self._waiting.append(_Job(group, template, defines, key, future))
        return future

    def take(self) -> None:
        """Compile the oldest waiting configuration with up to ``size`` - 1 others of its group (a compile thread's
        task, one per waiting configuration: a later one finds its configuration taken and returns)."""
        with self._lock:
            if not self._waiting:
                return
            group = self._waiting[0].group
            jobs = [job for job in self._waiting if job.group == group][: self.size]
            self._waiting = [job for job in self._waiting if job not in jobs]
        jobs = [job for job in jobs if job.future.set_running_or_notify_cancel()]  # a caller may have cancelled
        if not jobs:
            return
        try:
            results = self._compile(jobs)
        except BaseException as exc:  # nvcc vanished: every waiting caller hears it
            for job in jobs:
                job.future.set_exception(exc)
            return
        for job, result in zip(jobs, results):
            job.future.set_result(result)

    def cancel_waiting(self) -> None:
        with self._lock:
            for job in self._waiting:
                job.future.cancel()
            self._waiting.clear()

    def _compile(self, jobs: list[_Job]) -> list[CompileResult]:
        """One unit for the configurations not cached yet; alone where there is one, where the unit cannot be, or
        where a configuration's split ptxas failed (so that each failure is its own, and cached)."""
        compiler = self.compiler
        results = [compiler.cached(job.key) for job in jobs]
        todo = [i for i, r in enumerate(results) if r is None]
        together = self._unit(jobs[0].group, [jobs[i] for i in todo]) if len(todo) > 1 else None
        for n, i in enumerate(todo):
            mine = together[n] if together is not None else None
            results[i] = mine if mine is not None else compiler.compile(jobs[i].template, jobs[i].defines)
        if len(todo) > 1 and together is None and all(results[i].ok for i in todo):  # type: ignore[union-attr]
            self.alone.add(jobs[0].group)  # they compile alone, the unit does not: do not try it again
        return results  # type: ignore[return-value]

    def _unit(self, group: tuple, jobs: list[_Job]) -> list[CompileResult | None] | None:
        compiler = self.compiler
        path = Path(template_path(jobs[0].template))
        headers = self._unit_headers(group, path, jobs[0].defines)
        if headers is None:
            return None
        compiler.cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=compiler.cache_dir) as tmp:
            unit, ptx = Path(tmp) / "unit.cu", Path(tmp) / "unit.ptx"
            unit.write_text(compile_batch.unit_source(path, headers, [job.defines for job in jobs]))
            cmd = [*NICE, compiler.nvcc, "-ptx", "-O3", "-std=c++17", compiler.gencode(), f"-I{path.parent}", "-o",
                   str(ptx), str(unit)]  # fmt: skip
            code, _, front_s = compiler.run(cmd, None)  # no deadline: it holds several compiles' work
            if code != 0 or not ptx.is_file():
                return None
            text, kernels = ptx.read_text(), compile_batch.layout_of(path).kernels
            parts = [compile_batch.split_ptx(text, i, kernels) for i in range(len(jobs))]
            if not all(compile_batch.faithful(part, kernels) for part in parts):
                self.alone.add(group)
                return None
            return self._ptxas(group, jobs, parts, front_s)

    def _ptxas(self, group: tuple, jobs: list[_Job], parts: list[str],
               front_s: float) -> list[CompileResult | None] | None:  # fmt: skip
        """Each configuration's module to its cubin, stored as its own compile; None for one whose ptxas failed (it
        is compiled alone), and None for all where the group turns out not to batch."""
        compiler = self.compiler
        ptxas = str(Path(compiler.nvcc).resolve().with_name("ptxas"))
        if not os.access(ptxas, os.X_OK):  # no ptxas beside nvcc: this compiler compiles alone
            self.alone.add(group)
            return None
        results: list[CompileResult | None] = []
        for job, module in zip(jobs, parts):
            key = job.key
            (compiler.cache_dir / key[:2]).mkdir(exist_ok=True)
            with tempfile.TemporaryDirectory(dir=compiler.cache_dir / key[:2]) as own:
                part, out = Path(own) / "k.ptx", Path(own) / "k.cubin"
                part.write_text(module)
                # nvcc's own ptxas line: the cubin is then the one `nvcc -cubin -Xptxas -v` writes
                code, log, seconds = compiler.run([*NICE, ptxas, f"-arch={compiler.arch}", "-m64", "-v", str(part),
                                                   "-o", str(out)], compiler.deadline)  # fmt: skip
                if code is not None and (code != 0 or not out.is_file()):
                    results.append(None)
                    continue
                if code is not None and group not in self._checked:
                    if not self._same_alone(job, out):
                        self.alone.add(group)
                        return None
                    self._checked.add(group)
                # Its share of the unit's time, not recorded for the deadline: the median judges whole compiles.
                results.append(compiler.store(key, out, code, log, front_s / len(jobs) + seconds, timed=False))
        return results

    def _same_alone(self, job: _Job, cubin: Path) -> bool:
        with tempfile.TemporaryDirectory(dir=cubin.parent) as tmp:
            out = Path(tmp) / "alone.cubin"
            code, _, _ = self.compiler.nvcc_cubin(job.template, job.defines, out)
            return code == 0 and out.is_file() and cubin.is_file() and out.read_bytes() == cubin.read_bytes()

    def _unit_headers(self, group: tuple, path: Path, defines: Mapping[str, object]) -> list[str] | None:
        """The headers one configuration of ``group`` includes (``nvcc -M``, once per group)."""
        if group in self.alone:
            return None
        if group not in self._headers:
            compiler = self.compiler
            with tempfile.TemporaryDirectory() as tmp:
                rule = Path(tmp) / "unit.d"  # the rule alone, not nvcc's messages
                cmd = [*NICE, compiler.nvcc, "-M", "-std=c++17", compiler.gencode(),
                       *[f"-D{k}={v}" for k, v in defines.items()], "-MF", str(rule), str(path)]  # fmt: skip
                code, _, _ = compiler.run(cmd, None)
                if code != 0 or not rule.is_file():
                    self.alone.add(group)
                    return None
                self._headers[group] = compile_batch.header_list(rule.read_text(), path.parent)
        return self._headers[group]
