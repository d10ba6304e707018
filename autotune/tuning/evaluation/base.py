"""The Evaluator interface: what the search driver knows of compiling, validating and timing.

`GpuEvaluator` compiles with nvcc and measures in a GPU worker process; `ReplayEvaluator` answers from recorded
GPU measurements, so the driver, samplers and storage are tested on machines without a GPU.
"""

from __future__ import annotations

import statistics
from abc import ABC, abstractmethod
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Sequence

from autotune.device import DeviceInfo
from autotune.spaces.base import Config

# Why a candidate failed. Each failed trial carries one of these and a one-line reason.
FAILURE_KINDS = (
    "compile",  # nvcc rejected it
    "launch",  # the driver refused to load or launch it (too many registers / too much shared memory)
    "crash",  # it faulted on the GPU (illegal address, misaligned access, …); the worker was restarted
    "timeout",  # no answer within the per-candidate timeout (a hang); the worker was killed and restarted
    "wrong",  # relative error above the tolerance
    "nan",  # NaN or inf in the output where the reference is finite: elements not written, or overflow
    "worker",  # the worker process died for another reason
)


@dataclass
class Timing:
    """Summary of repeated event timings of one configuration, in milliseconds."""

    median: float
    minimum: float
    q1: float
    q3: float
    maximum: float
    reps: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> "Timing":
        s = sorted(samples)
        if len(s) >= 2:
            q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
        else:
            q1 = q3 = s[0]
        return cls(statistics.median(s), s[0], q1, q3, s[-1], len(s))

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return (self.q3 - self.q1) / self.median if self.median > 0 else 0.0


@dataclass
class Measurement:
    ok: bool
    failure: str | None = None  # one of FAILURE_KINDS when not ok
    reason: str | None = None
    timing: Timing | None = None
    max_rel_error: float | None = None
    registers: int | None = None
    spill_bytes: int | None = None
    shared_bytes: int | None = None  # static + dynamic, per block
    compile_s: float | None = None
    compile_cached: bool | None = None
    evaluate_s: float | None = None  # wall time on the GPU worker
    validate_s: float | None = None  # of which validating (the rest: timing)
    queue_s: float | None = None  # compiled, waiting for the GPU worker
    worker_restarted: bool = False
    raced: bool = False  # timed by two runs only, both clearly slower than the leaders (`racing`)

    @property
    def time_ms(self) -> float | None:
        return self.timing.median if self.timing else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Measurement":
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        if data.get("timing") is not None:
            data["timing"] = Timing(**data["timing"])
        return cls(**data)

    @classmethod
    def failed(cls, kind: str, reason: str, **extra: Any) -> "Measurement":
        assert kind in FAILURE_KINDS, kind
        return cls(ok=False, failure=kind, reason=reason, **extra)


@dataclass
class Toolchain:
    nvcc: str = ""
    flags: list[str] = field(default_factory=list)


class Evaluator(ABC):
    """Turns configurations into measurements; ``submit`` may run many at once."""

    device: DeviceInfo
    toolchain: Toolchain
    restarts: int = 0  # GPU worker restarts so far (crashes, hangs)
    # Seconds of start-up, by phase: ``startup`` before the first compile (a GPU evaluator's "device", asked of the
    # driver), ``beside`` during the first compiles (its "worker" process and context, "build" of the validation
    # kernel and baseline, "setup" of the inputs and float64 references); {} for none.
    startup: dict[str, float] = {}
    beside: dict[str, float] = {}

    @abstractmethod
    def submit(self, config: Config) -> "Future[Measurement]":
        """Compile, validate and time ``config``; the future never raises for a bad candidate."""

    @abstractmethod
    def retime(self, configs: Sequence[Config], rounds: int) -> list[Timing | None]:
        """Time already-measured configurations again, interleaved round-robin; None where one fails now."""

    def code_hash(self, config: Config) -> str | None:
        """The sha256 of ``config``'s cubin: its machine code (`autotune.results.storage.CodeHash`); None where the
        evaluator compiles nothing (a replay)."""
        return None

    def close(self) -> None:
        pass

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
