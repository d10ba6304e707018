"""What a search measures next: Optuna is asked (through the `RepairingSampler`, or the grid walk) until the
in-flight window is full, and each proposal is rejected (it breaks a constraint), answered as a duplicate (its
configuration is measured, or in flight, already), left to the process that claimed it, or submitted to the
evaluator. `autotune.tuning.search.Search` owns one and settles what it submitted.
"""

from __future__ import annotations

import warnings

import optuna
from optuna.trial import TrialState

from autotune.device import DeviceInfo
from autotune.results import studies
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace, config_key
from autotune.spaces.enumeration import configs
from autotune.spaces.optuna_mapping import suggest
from autotune.tuning.claims import Claim, Claims, Unshared, settle_unclaimed
from autotune.tuning.evaluation.base import Evaluator
from autotune.tuning.grid import GridWalk
from autotune.tuning.proposals import RepairingSampler
from autotune.tuning.search_report import SearchReport, SearchSettings
from autotune.tuning.study_starts import proposal_space
from autotune.tuning.study_sync import StudySync
from autotune.tuning.trial_ledger import TrialLedger
from autotune.tuning.trial_writer import TrialWriter


class Proposer:
    """Keeps one search's in-flight window full (see the module)."""

    def __init__(
        self,
        space: KernelSpace,
        shape: Shape,
        device: DeviceInfo,
        evaluator: Evaluator,
        study: optuna.Study,
        settings: SearchSettings,
        report: SearchReport,
        ledger: TrialLedger,
        writer: TrialWriter,
        claims: Claims | Unshared,
        sync: StudySync,
    ) -> None:
        """Installs the `RepairingSampler` on ``study`` (over the space of `proposal_space`)."""
        self.space = space
        self.shape = shape
        self.device = device
        self.evaluator = evaluator
        self.study = study
        self.settings = settings
        self.report = report
        self.ledger = ledger
        self.writer = writer
        self.claims = claims
        self.sync = sync
        self._idle = 0  # consecutive proposals that counted for nothing (rejected, duplicate, claimed elsewhere)
        self.proposals = proposal_space(space, study, shape, device)
        base = study.sampler.base if isinstance(study.sampler, RepairingSampler) else study.sampler
        self.sampler = study.sampler = RepairingSampler(base, self.proposals, shape, device,
                                                        self._measured_or_pending, claims.claim)  # fmt: skip
        self._grid: GridWalk | None = None
        if settings.sampler == "grid":
            self._grid = GridWalk(configs(self.proposals), space, shape, device, self._measured_or_pending)

    def _measured_or_pending(self, config: Config) -> bool:
        key = config_key(config)
        return self.ledger.taken(key) or key in self.claims.elsewhere

    def fill(self) -> None:
        """Propose until enough candidates are in flight, the study's target is in flight or claimed, or the
        proposals have counted for nothing too long (then the report says why the search stopped early)."""
        while (
            self.report.stopped_early is None
            and len(self.ledger.in_flight) < self.settings.in_flight
            and self.report.measured_total + len(self.ledger.in_flight) < self.settings.trials
            and self.claims.room()
        ):
            if self._idle >= self.settings.patience:
                self.report.stopped_early = f"{self._idle} proposals in a row were invalid or already measured"
                break
            with self.report.profile.optuna():
                self._propose()

    def _propose(self) -> None:
        if self._grid is not None and not self._grid.enqueue_next(self.study):
            self.report.stopped_early = "every valid configuration has been measured"
            return
        with warnings.catch_warnings():
            # We record heartbeats ourselves (StudySync.beat); Optuna warns that ask/tell users usually do not.
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed", category=UserWarning)
            trial = self.study.ask()
        try:
            self.sync.beat([trial])  # at once: a trial without any heartbeat is only failed after the grace period
            try:
                with warnings.catch_warnings():
                    # Define-by-run: an algorithm's parameters exist only in its trials (multivariate TPE groups
                    # them).
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    config = suggest(self.proposals, trial)
            except optuna.exceptions.UpdateFinishedTrialError:
                # A parameter's first write found the trial finished: another process popped the same enqueued
                # trial (SQLite cannot lock the row between read and update) and settled it first, or a stale
                # sweep failed it. Its record stands; this proposal counts for nothing here.
                if not self.writer.settled_elsewhere(trial):
                    raise
                self._idle += 1
                return
            self._place(trial, config)
        except BaseException as exc:  # interrupted between ask and submit: settle the trial unless it is in flight
            studies.release_interrupted_write(exc)
            placed = trial in self.ledger.in_flight_trials()
            running = {t.number for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
            if not placed and trial.number in running:
                self.writer.close_interrupted(trial)
            raise

    def _place(self, trial: optuna.Trial, config: Config) -> None:
        """Reject, answer as a duplicate, or submit a freshly asked trial."""
        problems = self.space.violations(config, self.shape, self.device)
        if problems:
            if self.writer.reject(trial, problems[0]):
                self.ledger.rejected(trial.number)
            self._idle += 1
            return
        key = config_key(config)
        known = self.ledger.known.get(key)
        if known is not None:
            self.writer.tell_duplicate(trial, known)
            self._idle += 1
            return
        in_flight = self.ledger.in_flight_for(key)
        if in_flight is not None:  # answered (and counted) when the original's result arrives
            in_flight.duplicates.append(trial)
            self._idle += 1
            return
        taken = self.claims.take(key, trial.number)
        if taken is not Claim.TAKEN:  # another process measures it, or the study's target is claimed
            settle_unclaimed(self.study, trial, taken)
            self._idle += 1
            return
        self._idle = 0
        self.ledger.start(self.evaluator.submit(config), trial, key, config)
