"""What a search is asked (`SearchSettings`), what it shows while it runs (`Progress`), what its hooks are told of
each measurement (`FinishedTrial`) and what it answers at the end (`SearchReport`)."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from autotune.device import DeviceInfo
from autotune.results import studies
from autotune.spaces.base import Config
from autotune.tuning.evaluation.base import Measurement
from autotune.tuning.ranking import Ranked
from autotune.tuning.samplers import DEFAULT_SAMPLER
from autotune.tuning.search_profile import Profile


@dataclass
class SearchSettings:
    trials: int  # measured trials the study should hold when the search ends
    sampler: str = DEFAULT_SAMPLER
    seed: int | None = None
    in_flight: int = 16  # candidates compiling or waiting for the GPU at once
    retime_top: int = 5
    retime_rounds: int = 20
    patience: int = 200  # consecutive proposals that count for nothing (rejected, duplicate) before stopping
    heartbeat_s: int = 5  # in-flight trials prove they are alive this often; silent for 4x longer: stale
    refresh_s: float = 2.0  # how often trials finished by other processes on the same study are read


@dataclass
class Progress:
    measured: int  # measured trials in the study
    target: int
    rejected: int  # this run
    duplicates: int
    failures: int
    best: Ranked | None

    @classmethod
    def of(cls, report: SearchReport, target: int, best: Ranked | None) -> Progress:
        return cls(measured=report.measured_total, target=target, rejected=report.rejected_now,
                   duplicates=report.duplicates_now, failures=sum(report.failures.values()), best=best)  # fmt: skip


@dataclass(frozen=True)
class FinishedTrial:
    """A measurement of this run, once the search has told it to the study and settled it in its ledger: what
    each of `autotune.tuning.search.Search.on_trial_finished` is called with."""

    number: int  # the trial's number in the study
    config: Config
    measurement: Measurement
    attrs: dict[str, Any]  # the user attributes written with it (`autotune.tuning.trial_writer.measured_attrs`)
    told: bool  # False: another process had finished the trial first, and ours was dropped

    @property
    def failed(self) -> bool:
        return studies.FAILURE in self.attrs


@dataclass
class SearchReport:
    study_name: str
    kernel: str
    shape: str
    dtype: str
    device: DeviceInfo
    metric_unit: str
    target: int
    measured_total: int = 0
    measured_now: int = 0
    rejected_now: int = 0
    rejected_total: int = 0
    duplicates_now: int = 0
    repaired_now: int = 0  # invalid proposals moved to the nearest valid configuration (`autotune.tuning.proposals`)
    moved_now: int = 0  # proposals of a measured configuration moved to the nearest unmeasured one
    failures: collections.Counter = field(default_factory=collections.Counter)  # study-wide, by kind
    failure_examples: dict[str, str] = field(default_factory=dict)
    restarts: int = 0  # GPU worker restarts in this run
    seeds: list[str] = field(default_factory=list)  # warm-start seeds enqueued by this run: "<study>#<trial>"
    profile: Profile = field(default_factory=Profile)  # where this run's time went
    ranking: list[Ranked] = field(default_factory=list)
    default: Ranked | None = None
    rule: Ranked | None = None  # the shape's rule default: what the dispatcher runs untuned
    stopped_early: str | None = None  # why fewer trials than asked were measured
    wall_s: float = 0.0

    @property
    def best(self) -> Ranked | None:
        return self.ranking[0] if self.ranking else None

    def count_finished(self, trial: FinishedTrial) -> None:
        """A `Search.on_trial_finished` hook: this run's measurements, and its failures by kind (the progress
        shows them; `TrialLedger.count_failures` recounts the study's at the end)."""
        if trial.failed:
            kind = trial.measurement.failure or "?"
            self.failures[kind] += 1
            self.failure_examples.setdefault(kind, trial.measurement.reason or "")
        if trial.told:
            self.measured_now += 1

    @property
    def speedup(self) -> float | None:
        if self.best is None or self.default is None:
            return None
        return self.default.time_ms / self.best.time_ms
