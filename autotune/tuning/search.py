"""The search driver: Optuna proposes, the space rejects, the evaluator measures, the best is kept.

    ask ─► a joint proposal that breaks a constraint, or is measured already, moves to the nearest valid,
           │ unmeasured configuration (autotune.tuning.proposals)
           ▼
        constraints ─(invalid)─► PRUNED, "rejected" (does not count toward --trials)
           │
           ├─(already measured)─► answered from the recorded result, "duplicate" (does not count)
           ▼
        evaluator.submit ─► (several in flight: nvcc runs ahead of the GPU) ─► tell COMPLETE (median ms) / FAIL
           ▼
        at the end: the best few (and the default) re-timed interleaved; the winner goes to the store

`Search` runs that loop; what it knows of the study's trials is its `TrialLedger`, what it writes to the study
goes through its `TrialWriter`, and its `StudySync` keeps it in step with other processes on the same study.
`autotune.tuning.tune` wires a kernel name, a shape and a database to a `Search`.
"""

from __future__ import annotations

import time
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Callable, Sequence

import optuna
from optuna.trial import TrialState

from autotune.results import studies
from autotune.shape import Shape, format_shape
from autotune.spaces.base import Config, KernelSpace, config_key
from autotune.spaces.enumeration import configs
from autotune.spaces.optuna_mapping import suggest
from autotune.tuning.claims import Claim, Claims, Unshared, settle_unclaimed
from autotune.tuning.evaluation.base import Evaluator, Measurement
from autotune.tuning.grid import GridWalk
from autotune.tuning.proposals import RepairingSampler
from autotune.tuning.ranking import rank_into
from autotune.tuning.search_report import Progress, SearchReport, SearchSettings
from autotune.tuning.study_starts import enqueue_starts, proposal_space
from autotune.tuning.study_sync import StudySync
from autotune.tuning.trial_ledger import TrialLedger
from autotune.tuning.trial_writer import TrialWriter, measured_attrs


class Search:
    """One search of one study to its target (see the module); `run` it once."""

    def __init__(
        self,
        space: KernelSpace,
        shape: Shape,
        evaluator: Evaluator,
        study: optuna.Study,
        settings: SearchSettings,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        liveness: studies.Liveness | None = None,
        seeds: Sequence[tuple[Config, str]] = (),
        claims: Claims | None = None,
    ) -> None:
        """``liveness`` keeps in-flight trials' heartbeats (`StudySync`). ``seeds``: (configuration, where it comes
        from) measured first in a new study, after the default (warm start, `autotune.tuning.warmstart`).
        ``claims``: the study's configurations measured or in flight in every process (`autotune.tuning.claims`)."""
        self.space = space
        self.shape = tuple(shape)
        self.evaluator = evaluator
        self.device = evaluator.device
        self.study = study
        self.settings = settings
        self.on_progress = on_progress
        self.claims: Claims | Unshared = claims or Unshared()
        self.report = SearchReport(
            study_name=study.study_name,
            kernel=space.name,
            shape=format_shape(self.shape),
            dtype=space.dtype,
            device=self.device,
            metric_unit=space.metric_unit,
            target=settings.trials,
        )
        self.ledger = TrialLedger(space, self.shape, self.report)
        self.writer = TrialWriter(study, self.claims, self.ledger, settings.sampler)
        self._idle = 0  # consecutive proposals that counted for nothing (rejected, duplicate, claimed elsewhere)
        self.profile = self.report.profile
        self.proposals = proposal_space(space, study, self.shape, self.device)
        base = study.sampler.base if isinstance(study.sampler, RepairingSampler) else study.sampler
        self.sampler = study.sampler = RepairingSampler(base, self.proposals, self.shape, self.device,
                                                        self._measured_or_pending, self.claims.claim)  # fmt: skip
        self._grid: GridWalk | None = None
        if settings.sampler == "grid":
            self._grid = GridWalk(configs(self.proposals), space, self.shape, self.device, self._measured_or_pending)
        self.sync = StudySync(study, space, self.ledger, self.claims, liveness)
        self.sync.resync()
        if not self.study.trials:
            self.report.seeds.extend(enqueue_starts(study, space, self.shape, self.device, seeds))

    def _measured_or_pending(self, config: Config) -> bool:
        key = config_key(config)
        return self.ledger.taken(key) or key in self.claims.elsewhere

    def _wait_for_others(self) -> bool:
        """With nothing of ours in flight, and the study short of its target: its claims reach the target, so other
        processes' trials are in flight. They are waited for (a dead process's fail by the stale sweep, and free
        their configurations)."""
        if self.report.stopped_early or self.report.measured_total >= self.settings.trials:
            return False
        time.sleep(self.settings.refresh_s)
        self.sync.resync()
        return True

    # --- proposing ------------------------------------------------------------------------------------------
    def _fill(self) -> None:
        """Propose until enough candidates are in flight, the study's target is in flight or claimed, or the
        proposals have counted for nothing too long."""
        while (
            self.report.stopped_early is None
            and len(self.ledger.in_flight) < self.settings.in_flight
            and self.report.measured_total + len(self.ledger.in_flight) < self.settings.trials
            and self.claims.room()
        ):
            if self._idle >= self.settings.patience:
                self.report.stopped_early = f"{self._idle} proposals in a row were invalid or already measured"
                break
            with self.profile.optuna():
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
            with warnings.catch_warnings():
                # Define-by-run: an algorithm's parameters exist only in its trials (multivariate TPE groups them).
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                config = suggest(self.proposals, trial)
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
            self.writer.reject(trial, problems[0])
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

    # --- results --------------------------------------------------------------------------------------------
    def _finish(self, future: Future) -> None:
        # The trial stays in flight until it is told: one interrupted before (or while) it is written is failed
        # as interrupted by `TrialWriter.abandon_in_flight` instead of staying RUNNING until another run's stale sweep.
        entry = self.ledger.in_flight[future]
        m: Measurement = future.result()  # raises only when the GPU is gone (DeviceError)
        self.profile.add(m)
        trial = entry.trial
        attrs = measured_attrs(m, self.space, self.shape)
        if studies.FAILURE in attrs:
            self.ledger.failed(m.failure, m.reason)
        frozen = self.writer.tell_measured(trial, m, attrs)
        if frozen is None:
            self.ledger.settle(future)
            self.claims.release(trial.number)  # failed by another process's stale sweep: its claim goes
            for duplicate in entry.duplicates:  # the original's result is not ours to give: measured again
                self.writer.close_interrupted(duplicate)
            return
        self.report.measured_now += 1
        self.ledger.remember(frozen.number, frozen.state, frozen.value, entry.config, {**trial.user_attrs, **attrs})
        for duplicate in entry.duplicates:
            self.writer.tell_duplicate(duplicate, self.ledger.known[entry.key])
        self.ledger.settle(future)

    def _progress(self) -> None:
        if self.on_progress:
            self.on_progress(Progress.of(self.report, self.settings.trials, self.ledger.best))

    # --- the loop -------------------------------------------------------------------------------------------
    def run(self) -> SearchReport:
        start = time.perf_counter()
        restarts0 = self.evaluator.restarts
        try:
            self._loop()
        except BaseException as exc:
            studies.release_interrupted_write(exc)
            self.writer.abandon_in_flight()
            raise
        self.report.restarts = self.evaluator.restarts - restarts0
        self.report.repaired_now = self.sampler.repaired
        self.report.moved_now = self.sampler.moved
        self.sync.refresh()
        self.sync.fail_stale()
        self.profile.wall_s = time.perf_counter() - start
        retime_start = time.perf_counter()
        rank_into(self.report, self.study, self.ledger.known.values(), self.space, self.shape, self.evaluator,
                  self.settings.retime_top, self.settings.retime_rounds)  # fmt: skip
        self.profile.retime_s = time.perf_counter() - retime_start
        self.ledger.count_failures()
        total = int(self.study.user_attrs.get("worker_restarts", 0)) + self.report.restarts
        self.study.set_user_attr("worker_restarts", total)
        self.report.wall_s = time.perf_counter() - start
        return self.report

    def _loop(self) -> None:
        """Keep the in-flight window full, and tell results as they come, until the study holds its target."""
        last_beat = last_refresh = time.monotonic()
        self._progress()
        while True:
            now = time.monotonic()
            if now - last_refresh >= self.settings.refresh_s:
                with self.profile.optuna():
                    self.sync.refresh()
                last_refresh = now
            if now - last_beat >= self.settings.heartbeat_s:
                self.sync.beat(self.ledger.in_flight_trials())
                last_beat = now
            self._fill()
            if not self.ledger.in_flight and not self._wait_for_others():
                break
            done, _ = wait(list(self.ledger.in_flight), timeout=1.0, return_when=FIRST_COMPLETED)
            # In trial order, so that a replayed search with a fixed seed is reproducible.
            for future in sorted(done, key=lambda f: self.ledger.in_flight[f].trial.number):
                with self.profile.optuna():
                    self._finish(future)
                self._progress()
