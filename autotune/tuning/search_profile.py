"""Where a search's time goes (``autotune search --profile``).

Phases, summed over the candidates measured by this run:

* compile: nvcc seconds per candidate (CPU time in parallel jobs; cached candidates cost nothing);
* queue wait: compiled candidates waiting for the GPU worker (large: the GPU is the bottleneck);
* validate and time: the GPU worker's seconds (their sum against the wall time is how busy the GPU was;
  a GPU idle much of the time while little waits in the queue means compilation is the bottleneck); a raced
  candidate (clearly slower than the leaders) is timed by two runs only;
* optuna: the driver's ask / suggest / tell and reading the study (the sampler's own cost);
* retime: the final interleaved re-timing of the leaders;
* start-up, before the search (not in its wall time): the GPU worker's process and context, building the
  validation kernel and the baseline, and the worker's inputs and float64 references.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from autotune.tuning.evaluation.base import Measurement

if TYPE_CHECKING:
    from autotune.tuning.search_report import FinishedTrial


# The start-up phases' names in the report (`Evaluator.startup`, `Evaluator.beside`).
PHASE_NAMES = {"device": "the driver's description of the GPU", "worker": "GPU worker",
               "build": "validation kernel and baseline", "setup": "inputs and references", "others": "the other GPUs"}


@dataclass
class Profile:
    wall_s: float = 0.0
    measured: int = 0
    compiled: int = 0  # compiled by nvcc in this run (not from the cache)
    cached: int = 0
    raced: int = 0  # timed by two runs only (`autotune.tuning.evaluation.racing`)
    compile_s: float = 0.0
    queue_s: float = 0.0
    validate_s: float = 0.0
    time_s: float = 0.0
    optuna_s: float = 0.0
    retime_s: float = 0.0
    startup: dict[str, float] = field(default_factory=dict)  # the evaluator's start-up phases (`Evaluator.startup`)
    beside: dict[str, float] = field(default_factory=dict)  # its worker's, beside the first compiles (`.beside`)

    def add(self, m: Measurement) -> None:
        self.measured += 1
        if m.compile_cached:
            self.cached += 1
        elif m.compile_s is not None:
            self.compiled += 1
            self.compile_s += m.compile_s
        self.queue_s += m.queue_s or 0.0
        self.raced += m.raced
        if m.evaluate_s is not None:
            validate = m.validate_s if m.validate_s is not None else m.evaluate_s
            self.validate_s += validate
            self.time_s += max(0.0, m.evaluate_s - validate)

    def count_finished(self, trial: FinishedTrial) -> None:
        """A `Search.on_trial_finished` hook: every measurement of this run, told or not."""
        self.add(trial.measurement)

    @contextmanager
    def optuna(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.optuna_s += time.perf_counter() - t0

    @property
    def gpu_busy(self) -> float:
        """Share of the search's wall time the GPU worker spent validating and timing."""
        return (self.validate_s + self.time_s) / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), gpu_busy=self.gpu_busy)

    def lines(self) -> list[str]:
        n = max(1, self.measured)
        rows = [
            ("compile (nvcc, CPU s)", self.compile_s, f"{self.compiled} compiled, {self.cached} from the cache"),
            ("queue wait", self.queue_s, "compiled, waiting for the GPU"),
            ("validate (GPU)", self.validate_s, ""),
            ("time (GPU)", self.time_s, f"{self.raced} raced (two runs only)" if self.raced else ""),
            ("optuna (driver)", self.optuna_s, "ask, suggest, tell, reading the study"),
            ("retime leaders", self.retime_s, ""),
        ]
        out = [f"profile: {self.measured} candidates in {self.wall_s:.1f} s wall; GPU busy {100 * self.gpu_busy:.0f}%"]
        for title, phases in (("start-up before the search", self.startup),
                              ("beside the first compiles", self.beside)):  # fmt: skip
            if phases:
                named = ", ".join(f"{PHASE_NAMES.get(k, k)} {v:.1f} s" for k, v in phases.items())
                out.append(f"  {title} {sum(phases.values()):.1f} s: {named}")
        for name, total, note in rows:
            out.append(f"  {name:<22} {total:8.2f} s  {1000 * total / n:8.1f} ms/candidate  {note}".rstrip())
        return out
