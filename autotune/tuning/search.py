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

`Search` runs that loop; its `Proposer` keeps the in-flight window full (asks, rejects, answers duplicates,
submits), what it knows of the study's trials is its `TrialLedger`, what it writes to the study goes through its
`TrialWriter`, and its `StudySync` keeps it in step with other processes on the same study. What a measurement
does besides being told to the study and settled in the ledger (the report's counts, the profile, the progress
shown) is done by the hooks of `Search.on_trial_finished`, to which a caller may add its own.
`autotune.tuning.tune` wires a kernel name, a shape and a database to a `Search`.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Callable, Sequence

import optuna

from autotune.results import studies
from autotune.shape import Shape, format_shape
from autotune.spaces.base import Config, KernelSpace
from autotune.tuning.claims import Claims, Unshared
from autotune.tuning.evaluation.base import Evaluator, Measurement
from autotune.tuning.proposer import Proposer
from autotune.tuning.ranking import rank_into
from autotune.tuning.search_report import FinishedTrial, Progress, SearchReport, SearchSettings
from autotune.tuning.study_starts import enqueue_starts
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
        self.profile = self.report.profile
        self.profile.startup = dict(evaluator.startup)
        self.sync = StudySync(study, space, self.ledger, self.claims, liveness)
        self.proposer = Proposer(space, self.shape, self.device, evaluator, study, settings, self.report,
                                 self.ledger, self.writer, self.claims, self.sync)  # fmt: skip
        # Called, in this order, with each measurement of this run once it is told to the study and settled in the
        # ledger (a caller may append its own): what a measurement does besides the search's own bookkeeping. The
        # study write is not a hook: whether it took (or another process had finished the trial) decides what the
        # ledger keeps and whether the claim and the duplicates are released, and the sampler learns from it.
        self.on_trial_finished: list[Callable[[FinishedTrial], None]] = [
            self.report.count_finished,
            self.profile.count_finished,
        ]
        if on_progress is not None:
            self.on_trial_finished.append(lambda _: self._progress())
        self.sync.resync()
        if not self.study.trials:
            self.report.seeds.extend(enqueue_starts(study, space, self.shape, self.device, seeds))

    def _wait_for_others(self) -> bool:
        """With nothing of ours in flight, and the study short of its target: its claims reach the target, so other
        processes' trials are in flight. They are waited for (a dead process's fail by the stale sweep, and free
        their configurations)."""
        if self.report.stopped_early or self.report.measured_total >= self.settings.trials:
            return False
        time.sleep(self.settings.refresh_s)
        self.sync.resync()
        return True

    # --- results --------------------------------------------------------------------------------------------
    def _finish(self, future: Future) -> FinishedTrial:
        """Tell a measurement to the study and settle it in the ledger (the hooks are called after)."""
        # The trial stays in flight until it is told: one interrupted before (or while) it is written is failed
        # as interrupted by `TrialWriter.abandon_in_flight` instead of staying RUNNING until another run's stale sweep.
        entry = self.ledger.in_flight[future]
        m: Measurement = future.result()  # raises only when the GPU is gone (DeviceError)
        trial = entry.trial
        attrs = measured_attrs(m, self.space, self.shape)
        frozen = self.writer.tell_measured(trial, m, attrs)
        finished = FinishedTrial(trial.number, entry.config, m, attrs, told=frozen is not None)
        if frozen is None:
            self.ledger.settle(future)
            self.claims.release(trial.number)  # failed by another process's stale sweep: its claim goes
            for duplicate in entry.duplicates:  # the original's result is not ours to give: measured again
                self.writer.close_interrupted(duplicate)
            return finished
        self.ledger.remember(frozen.number, frozen.state, frozen.value, entry.config, {**trial.user_attrs, **attrs})
        for duplicate in entry.duplicates:
            self.writer.tell_duplicate(duplicate, self.ledger.known[entry.key])
        self.ledger.settle(future)
        return finished

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
        self.report.repaired_now = self.proposer.sampler.repaired
        self.report.moved_now = self.proposer.sampler.moved
        self.sync.refresh()
        self.sync.fail_stale()
        self.profile.wall_s = time.perf_counter() - start
        self.profile.beside = dict(self.evaluator.beside)  # the worker's start-up phases, those it has finished
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
            self.proposer.fill()
            if not self.ledger.in_flight and not self._wait_for_others():
                break
            done, _ = wait(list(self.ledger.in_flight), timeout=1.0, return_when=FIRST_COMPLETED)
            # In trial order, so that a replayed search with a fixed seed is reproducible.
            for future in sorted(done, key=lambda f: self.ledger.in_flight[f].trial.number):
                with self.profile.optuna():
                    finished = self._finish(future)
                for hook in self.on_trial_finished:
                    hook(finished)
