"""A search's account of its study's trials, in one place.

Measured trials by configuration (ours, earlier runs', other processes'), the trials in flight by future and by
configuration (with the later proposals of the same configuration that their result will answer), the trial
numbers already counted, the fastest measured so far, and the counts the `SearchReport` shows. Nothing here
writes to the study: `autotune.tuning.trial_writer` does.
"""

from __future__ import annotations

import collections
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Iterable

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.results import studies
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace, config_key
from autotune.spaces.optuna_mapping import config_of
from autotune.tuning.ranking import Known, Ranked
from autotune.tuning.search_report import SearchReport


@dataclass
class InFlight:
    """A trial being measured, and the later proposals of its configuration that its result will answer."""

    trial: optuna.Trial
    key: str
    config: Config
    duplicates: list[optuna.Trial] = field(default_factory=list)


class TrialLedger:
    """The account of one search's study (see the module)."""

    def __init__(self, space: KernelSpace, shape: Shape, report: SearchReport) -> None:
        self.space = space
        self.shape = shape
        self.report = report
        self.known: dict[str, Known] = {}  # measured, by configuration key
        self.in_flight: dict[Future, InFlight] = {}
        self._in_flight_keys: dict[str, InFlight] = {}
        self._counted: set[int] = set()  # trial numbers already counted
        self.best: Ranked | None = None

    # --- questions ------------------------------------------------------------------------------------------
    def taken(self, key: str) -> bool:
        """Whether the configuration is measured or in flight (in this process)."""
        return key in self.known or key in self._in_flight_keys

    def in_flight_for(self, key: str) -> InFlight | None:
        return self._in_flight_keys.get(key)

    def in_flight_trials(self) -> list[optuna.Trial]:
        """Every trial waiting for a result: those measured and the duplicates they will answer."""
        return [t for p in self.in_flight.values() for t in (p.trial, *p.duplicates)]

    def slowest(self) -> float:
        """The slowest measured time (100 ms before any): a rejected proposal's penalty is a multiple of it."""
        return max((k.value for k in self.known.values() if k.value is not None), default=100.0)

    # --- what happened --------------------------------------------------------------------------------------
    def read(self, trials: Iterable[FrozenTrial]) -> None:
        """Count the measured (and rejected) trials of the study not counted yet: ours, earlier runs', other
        processes'."""
        for t in trials:
            if t.number in self._counted:
                continue
            if studies.is_measured(t):
                self.remember(t.number, t.state, t.value, config_of(self.space, t.params), t.user_attrs)
            elif t.user_attrs.get(studies.OUTCOME) == studies.REJECTED:
                self._counted.add(t.number)
                self.report.rejected_total += 1

    def remember(self, number: int, state: TrialState, value: float | None, config: Config, attrs: dict) -> None:
        """A measured trial (complete or failed)."""
        self._counted.add(number)
        key = config_key(config)
        if key in self.known and self.known[key].number != number:  # another process measured it as well
            self.report.measured_total += 1
            return
        self.known[key] = Known(number, state, value, config, dict(attrs))
        self.report.measured_total += 1
        if state == TrialState.COMPLETE and value is not None and (self.best is None or value < self.best.time_ms):
            self.best = Ranked(
                number, config, value, self.space.metric(self.shape, value), attrs.get(studies.REGISTERS), False
            )

    def rejected(self, number: int) -> None:
        """A proposal of this run broke a constraint (counted here: `read` must not count it again)."""
        self._counted.add(number)
        self.report.rejected_now += 1
        self.report.rejected_total += 1

    def answered_duplicate(self) -> None:
        self.report.duplicates_now += 1

    def start(self, future: Future, trial: optuna.Trial, key: str, config: Config) -> None:
        """A trial submitted for measurement."""
        entry = InFlight(trial, key, config)
        self.in_flight[future] = entry
        self._in_flight_keys[key] = entry

    def settle(self, future: Future) -> InFlight:
        """A trial in flight is told (or was found finished elsewhere): it is no longer in flight."""
        entry = self.in_flight.pop(future)
        del self._in_flight_keys[entry.key]
        return entry

    def clear_in_flight(self) -> None:
        self.in_flight.clear()
        self._in_flight_keys.clear()

    def count_failures(self) -> None:
        """Failures over the whole study (earlier runs included), by kind, with one example each, into the
        report."""
        failures: collections.Counter = collections.Counter()
        for known in self.known.values():
            if known.state == TrialState.FAIL:
                kind = known.attrs.get(studies.FAILURE, "?")
                failures[kind] += 1
                self.report.failure_examples.setdefault(kind, known.attrs.get(studies.REASON, ""))
        self.report.failures = failures
