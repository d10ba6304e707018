"""What became of a trial, written to the study: rejected, answered as a duplicate, measured, or interrupted.

Every write may find the trial finished already by another process: two processes popped the same enqueued
trial (SQLite cannot lock the row between read and update), or a stale sweep failed it while this process was
too busy to beat. Its record then stands and ours is dropped (`settled_elsewhere`).
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.results import studies
from autotune.shape import Shape
from autotune.spaces.base import KernelSpace
from autotune.tuning.claims import Claims, Unshared
from autotune.tuning.evaluation.base import Measurement
from autotune.tuning.ranking import Known
from autotune.tuning.samplers import learns_from_pruned
from autotune.tuning.trial_ledger import TrialLedger


def measured_attrs(m: Measurement, space: KernelSpace, shape: Shape) -> dict[str, Any]:
    """The user attributes of a measured trial: the whole measurement, and its metric and registers, or why it
    failed."""
    attrs: dict[str, Any] = {studies.OUTCOME: studies.MEASURED, studies.MEASUREMENT: m.to_dict()}
    if m.ok and m.time_ms is not None:
        attrs[studies.METRIC] = space.metric(shape, m.time_ms)
        attrs[studies.REGISTERS] = m.registers
    else:
        attrs[studies.FAILURE] = m.failure
        attrs[studies.REASON] = m.reason
    return attrs


class TrialWriter:
    """Writes the outcomes of one search's trials to its study (see the module)."""

    def __init__(self, study: optuna.Study, claims: Claims | Unshared, ledger: TrialLedger, sampler: str) -> None:
        self.study = study
        self.claims = claims
        self.ledger = ledger
        self.sampler = sampler  # the sampler's name: how a rejected proposal is told

    def reject(self, trial: optuna.Trial, reason: str) -> bool:
        """A proposal that breaks a constraint; False where another process finished the trial first."""
        try:
            trial.set_user_attr(studies.OUTCOME, studies.REJECTED)
            trial.set_user_attr(studies.REASON, reason)
            if learns_from_pruned(self.sampler):
                self.study.tell(trial, state=TrialState.PRUNED)
            else:  # a penalty the sampler can learn from; our accounting goes by the outcome, not the state
                self.study.tell(trial, 10.0 * self.ledger.slowest())
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            if not self.settled_elsewhere(trial):
                raise
            return False
        return True

    def tell_duplicate(self, trial: optuna.Trial, known: Known) -> None:
        """A proposal of a configuration measured already, answered from that measurement."""
        try:
            trial.set_user_attr(studies.OUTCOME, studies.DUPLICATE)
            trial.set_user_attr(studies.DUPLICATE_OF, known.number)
            if known.state == TrialState.COMPLETE:
                self.study.tell(trial, known.value)
            else:
                trial.set_user_attr(studies.REASON, known.attrs.get(studies.REASON, "failed"))
                self.study.tell(trial, state=TrialState.FAIL)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            if not self.settled_elsewhere(trial):
                raise
            return
        self.ledger.answered_duplicate()

    def tell_measured(self, trial: optuna.Trial, m: Measurement, attrs: dict[str, Any]) -> FrozenTrial | None:
        """A measurement, with the attributes that describe it; None where another process finished the trial
        first."""
        try:
            for k, v in attrs.items():
                trial.set_user_attr(k, v)
            if m.ok:
                return self.study.tell(trial, m.time_ms)
            return self.study.tell(trial, state=TrialState.FAIL)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            if not self.settled_elsewhere(trial):
                raise
            return None

    def settled_elsewhere(self, trial: optuna.Trial) -> bool:
        """Whether ``trial`` was finished by another process while we measured it (see the module); `read` of the
        ledger counts theirs."""
        try:
            return trial.storage.get_trial(studies.trial_id(trial)).state.is_finished()
        except Exception:
            return False

    def abandon_in_flight(self) -> None:
        """Mark every trial still in flight as interrupted (failed), so none stays RUNNING."""
        for entry in list(self.ledger.in_flight.values()):
            for trial in [entry.trial, *entry.duplicates]:
                self.close_interrupted(trial)
        self.ledger.clear_in_flight()

    def close_interrupted(self, trial: optuna.Trial) -> None:
        """Fail a trial the search gives up on (interrupted, or its original was finished elsewhere), releasing
        its claim."""
        try:
            self.claims.release(trial.number)
            trial.set_user_attr(studies.OUTCOME, studies.INTERRUPTED)
            self.study.tell(trial, state=TrialState.FAIL)
        except Exception:  # storage gone too: the next run's stale-trial sweep handles it
            pass
