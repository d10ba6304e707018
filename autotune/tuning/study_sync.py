"""A search in step with its study, which earlier runs and other processes (on this host or others) write too:
their finished trials read into the ledger, the trials of killed processes failed, heartbeats for ours, and the
study's claims brought in line with its trials."""

from __future__ import annotations

import optuna

from autotune.results import studies
from autotune.spaces.base import KernelSpace, config_key
from autotune.spaces.optuna_mapping import config_of
from autotune.tuning.claims import Claims, Unshared
from autotune.tuning.trial_ledger import TrialLedger


class StudySync:
    """Keeps one search in step with its study (see the module)."""

    def __init__(self, study: optuna.Study, space: KernelSpace, ledger: TrialLedger, claims: Claims | Unshared,
                 liveness: studies.Liveness | None) -> None:  # fmt: skip
        """``liveness`` keeps in-flight trials' heartbeats: trials of a process that was killed then go stale
        and are failed by the next run instead of staying RUNNING."""
        self.study = study
        self.space = space
        self.ledger = ledger
        self.claims = claims
        self._liveness = liveness

    def refresh(self) -> None:
        """Count the measured trials the study holds (ours, earlier runs', other processes')."""
        self.claims.elsewhere.clear()  # measured ones are known now; any still in flight are claimed again
        self.ledger.read(self.study.get_trials(deepcopy=False))

    def fail_stale(self) -> None:
        """Trials left RUNNING by a killed process become FAIL."""
        if self._liveness is not None:
            self._liveness.sweep(self.study)

    def resync(self) -> None:
        """Fail the trials of killed processes, count the study's measured trials, bring its claims in line."""
        self.fail_stale()
        self.refresh()
        self.claims.reconcile(self.study.get_trials(deepcopy=False),
                              lambda t: config_key(config_of(self.space, t.params)))  # fmt: skip

    def beat(self, trials: list[optuna.Trial]) -> None:
        """Our trials in flight are alive."""
        if self._liveness is not None:
            self._liveness.beat(trials)
