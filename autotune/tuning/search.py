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

`tune` wires a kernel name, a shape and a database to a `Search`; the CLI and the Python API both call it.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import random
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import optuna
from optuna.trial import TrialState

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.results.storage import Database, check_database, resolve_url
from autotune.shape import Shape, format_shape
from autotune.spaces import get_space
from autotune.spaces.base import ALGO, Config, KernelSpace, config_key
from autotune.spaces.enumeration import configs
from autotune.spaces.optuna_mapping import config_of, optuna_params, suggest
from autotune.tuning.claims import Claim, Claims, Unshared, settle_unclaimed
from autotune.tuning.evaluation.base import Evaluator, Measurement
from autotune.tuning.proposals import RepairingSampler
from autotune.tuning.ranking import Known as _Known
from autotune.tuning.ranking import Ranked, rank, winner_entry
from autotune.tuning.samplers import DEFAULT_SAMPLER, learns_from_pruned, make_sampler
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
    stopped_early: str | None = None  # why fewer trials than asked were measured
    wall_s: float = 0.0

    @property
    def best(self) -> Ranked | None:
        return self.ranking[0] if self.ranking else None

    @property
    def speedup(self) -> float | None:
        if self.best is None or self.default is None:
            return None
        return self.default.time_ms / self.best.time_ms


@dataclass
class _Pending:
    trial: optuna.Trial
    key: str
    config: Config
    duplicates: list[optuna.Trial] = field(default_factory=list)


class Search:
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
        """``liveness`` keeps in-flight trials' heartbeats: trials of a process that was killed then go stale
        and are failed by the next run instead of staying RUNNING. ``seeds``: (configuration, where it comes
        from) measured first in a new study, after the default (warm start, `autotune.tuning.warmstart`). ``claims``:
        the study's configurations measured or in flight in every process (`autotune.tuning.claims`)."""
        self.space = space
        self.shape = tuple(shape)
        self.evaluator = evaluator
        self.device = evaluator.device
        self.study = study
        self.settings = settings
        self.on_progress = on_progress
        self.claims: Claims | Unshared = claims or Unshared()
        self.known: dict[str, _Known] = {}
        self.pending: dict[Future, _Pending] = {}
        self.pending_keys: dict[str, _Pending] = {}
        self.report = SearchReport(
            study_name=study.study_name,
            kernel=space.name,
            shape=format_shape(self.shape),
            dtype=space.dtype,
            device=self.device,
            metric_unit=space.metric_unit,
            target=settings.trials,
        )
        self._idle = 0
        self.profile = self.report.profile
        self.proposals = self._proposal_space()
        base = study.sampler.base if isinstance(study.sampler, RepairingSampler) else study.sampler
        self.sampler = study.sampler = RepairingSampler(base, self.proposals, self.shape, self.device,
                                                        self._measured_or_pending, self.claims.claim)  # fmt: skip
        self._grid = iter(configs(self.proposals)) if settings.sampler == "grid" else None
        self._best: Ranked | None = None
        self._liveness = liveness
        self._seen: set[int] = set()  # trial numbers already counted
        self._resync()
        if not self.study.trials:
            self._enqueue_starts(seeds)

    def _proposal_space(self) -> KernelSpace:
        """What the sampler proposes from: the space without the algorithms that cannot compute this shape on this
        device. A study begun before that narrowing keeps the algorithm choices it recorded (Optuna refuses to
        change a parameter's distribution within a study)."""
        recorded = next((t.distributions[ALGO].choices for t in self.study.get_trials(deepcopy=False)
                         if ALGO in t.distributions), None)  # fmt: skip
        if recorded is not None and not set(recorded) <= set(self.space.domain(ALGO)):
            recorded = None
        return self.space.for_problem(self.shape, self.device, recorded)

    def _measured_or_pending(self, config: Config) -> bool:
        key = config_key(config)
        return key in self.known or key in self.pending_keys or key in self.claims.elsewhere

    # --- resume, and other processes on the same study -------------------------------------------------------
    def _refresh(self) -> None:
        """Count the measured trials the study holds (ours, earlier runs', other processes')."""
        self.claims.elsewhere.clear()  # measured ones are known now; any still in flight are claimed again
        for t in self.study.get_trials(deepcopy=False):
            if t.number in self._seen:
                continue
            if studies.is_measured(t):
                self._remember(t.number, t.state, t.value, config_of(self.space, t.params), t.user_attrs)
            elif t.user_attrs.get(studies.OUTCOME) == studies.REJECTED:
                self._seen.add(t.number)
                self.report.rejected_total += 1

    def _fail_stale(self) -> None:
        """Trials left RUNNING by a killed process become FAIL."""
        if self._liveness is not None:
            self._liveness.sweep(self.study)

    def _resync(self) -> None:
        """Fail the trials of killed processes, count the study's measured trials, bring its claims in line."""
        self._fail_stale()
        self._refresh()
        self.claims.reconcile(self.study.get_trials(deepcopy=False),
                              lambda t: config_key(config_of(self.space, t.params)))

    def _wait_for_others(self) -> bool:
        """With nothing of ours in flight, and the study short of its target: its claims reach the target, so other
        processes' trials are in flight. They are waited for (a dead process's fail by the stale sweep, and free
        their configurations)."""
        if self.report.stopped_early or self.report.measured_total >= self.settings.trials:
            return False
        time.sleep(self.settings.refresh_s)
        self._resync()
        return True

    def _beat(self, trials: list[optuna.Trial]) -> None:
        if self._liveness is not None:
            self._liveness.beat(trials)

    def _remember(self, number: int, state: TrialState, value: float | None, config: Config, attrs: dict) -> None:
        self._seen.add(number)
        key = config_key(config)
        if key in self.known and self.known[key].number != number:  # another process measured it as well
            self.report.measured_total += 1
            return
        self.known[key] = _Known(number, state, value, config, dict(attrs))
        self.report.measured_total += 1
        if state == TrialState.COMPLETE and value is not None and (self._best is None or value < self._best.time_ms):
            self._best = Ranked(
                number, config, value, self.space.metric(self.shape, value), attrs.get(studies.REGISTERS), False
            )

    def _enqueue_starts(self, seeds: Sequence[tuple[Config, str]]) -> None:
        """A new study measures the template's default configuration first (the baseline of the speedup), then
        the space's rule-based default for this shape (so a tuned result is never slower than the untuned
        dispatcher's choice), then the warm-start seeds; all are ordinary measured trials, marked by their role."""
        default = dict(self.space.default_config)
        queued = set()
        if not self.space.violations(default, self.shape, self.device):
            self.study.enqueue_trial(optuna_params(self.space, default), user_attrs={studies.ROLE: "default"})
            queued.add(config_key(default))
        rule = self._rule_default()
        if rule is not None and config_key(rule) not in queued and not self.space.violations(rule, self.shape,
                                                                                               self.device):
            self.study.enqueue_trial(optuna_params(self.space, rule), user_attrs={studies.ROLE: studies.RULE})
            queued.add(config_key(rule))
        for config, source in seeds:
            key = config_key(config)
            if key in queued or self.space.violations(config, self.shape, self.device):
                continue
            queued.add(key)
            self.report.seeds.append(source)
            self.study.enqueue_trial(optuna_params(self.space, config),
                                     user_attrs={studies.ROLE: studies.SEED, studies.SEED_FROM: source})  # fmt: skip

    def _rule_default(self) -> Config | None:
        """What the dispatcher runs at this shape untuned; None where the space's rule does not apply to its own
        parameters (a subclass that dropped or renamed a parameter the inherited rule picks)."""
        try:
            rule = self.space.rule_default(self.shape, self.device)
        except KeyError:
            return None
        return rule if set(rule) <= {p.name for p in self.space.params} else None

    # --- proposing ------------------------------------------------------------------------------------------
    def _next_grid_config(self) -> Config | None:
        assert self._grid is not None
        for config in self._grid:
            if not self._measured_or_pending(config) and not self.space.violations(config, self.shape, self.device):
                return config
        return None

    def _propose(self) -> None:
        if self._grid is not None and not self._waiting():
            config = self._next_grid_config()
            if config is None:
                self.report.stopped_early = "every valid configuration has been measured"
                return
            self.study.enqueue_trial(optuna_params(self.space, config))
        with warnings.catch_warnings():
            # We record heartbeats ourselves (Search._beat); Optuna warns that ask/tell users usually do not.
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed", category=UserWarning)
            trial = self.study.ask()
        try:
            self._beat([trial])  # at once: a trial without any heartbeat is only failed after the grace period
            with warnings.catch_warnings():
                # Define-by-run: an algorithm's parameters exist only in its trials (multivariate TPE groups them).
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                config = suggest(self.proposals, trial)
            self._place(trial, config)
        except BaseException as exc:  # interrupted between ask and submit: settle the trial unless it is in flight
            studies.release_interrupted_write(exc)
            placed = any(trial in (p.trial, *p.duplicates) for p in self.pending.values())
            running = {t.number for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
            if not placed and trial.number in running:
                self._close_interrupted(trial)
            raise

    def _waiting(self) -> bool:
        """Enqueued trials (default, seeds) not yet asked for: the grid waits until they are taken."""
        return bool(self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))

    def _place(self, trial: optuna.Trial, config: Config) -> None:
        """Reject, answer as a duplicate, or submit a freshly asked trial."""
        problems = self.space.violations(config, self.shape, self.device)
        if problems:
            trial.set_user_attr(studies.OUTCOME, studies.REJECTED)
            trial.set_user_attr(studies.REASON, problems[0])
            if learns_from_pruned(self.settings.sampler):
                self.study.tell(trial, state=TrialState.PRUNED)
            else:  # a penalty the sampler can learn from; our accounting goes by the outcome, not the state
                slowest = max((k.value for k in self.known.values() if k.value is not None), default=100.0)
                self.study.tell(trial, 10.0 * slowest)
            self._seen.add(trial.number)  # counted here: _refresh must not count it again
            self.report.rejected_now += 1
            self.report.rejected_total += 1
            self._idle += 1
            return
        key = config_key(config)
        if key in self.known:
            self._tell_duplicate(trial, self.known[key])
            self._idle += 1
            return
        if key in self.pending_keys:  # answered (and counted) when the original's result arrives
            self.pending_keys[key].duplicates.append(trial)
            self._idle += 1
            return
        taken = self.claims.take(key, trial.number)
        if taken is not Claim.TAKEN:  # another process measures it, or the study's target is claimed
            settle_unclaimed(self.study, trial, taken)
            self._idle += 1
            return
        self._idle = 0
        pending = _Pending(trial, key, config)
        self.pending[self.evaluator.submit(config)] = pending
        self.pending_keys[key] = pending

    def _tell_duplicate(self, trial: optuna.Trial, known: _Known) -> None:
        try:
            trial.set_user_attr(studies.OUTCOME, studies.DUPLICATE)
            trial.set_user_attr(studies.DUPLICATE_OF, known.number)
            if known.state == TrialState.COMPLETE:
                self.study.tell(trial, known.value)
            else:
                trial.set_user_attr(studies.REASON, known.attrs.get(studies.REASON, "failed"))
                self.study.tell(trial, state=TrialState.FAIL)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            if not self._settled_elsewhere(trial):
                raise
            return
        self.report.duplicates_now += 1

    # --- results --------------------------------------------------------------------------------------------
    def _finish(self, future: Future) -> None:
        # The trial stays pending until it is told: one interrupted before (or while) it is written is failed
        # as interrupted by `_abandon_pending` instead of staying RUNNING until another run's stale sweep.
        pending = self.pending[future]
        m: Measurement = future.result()  # raises only when the GPU is gone (DeviceError)
        self.profile.add(m)
        trial = pending.trial
        attrs: dict[str, Any] = {studies.OUTCOME: studies.MEASURED, studies.MEASUREMENT: m.to_dict()}
        if m.ok and m.time_ms is not None:
            attrs[studies.METRIC] = self.space.metric(self.shape, m.time_ms)
            attrs[studies.REGISTERS] = m.registers
        else:
            attrs[studies.FAILURE] = m.failure
            attrs[studies.REASON] = m.reason
            self.report.failures[m.failure or "?"] += 1
            self.report.failure_examples.setdefault(m.failure or "?", m.reason or "")
        try:
            for k, v in attrs.items():
                trial.set_user_attr(k, v)
            if m.ok:
                frozen = self.study.tell(trial, m.time_ms)
            else:
                frozen = self.study.tell(trial, state=TrialState.FAIL)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            if not self._settled_elsewhere(trial):
                raise
            self._settle(future)
            self.claims.release(trial.number)  # failed by another process's stale sweep: its claim goes
            for duplicate in pending.duplicates:  # the original's result is not ours to give: measured again
                self._close_interrupted(duplicate)
            return
        self.report.measured_now += 1
        self._remember(frozen.number, frozen.state, frozen.value, pending.config, {**trial.user_attrs, **attrs})
        for duplicate in pending.duplicates:
            self._tell_duplicate(duplicate, self.known[pending.key])
        self._settle(future)

    def _settle(self, future: Future) -> None:
        pending = self.pending.pop(future)
        del self.pending_keys[pending.key]

    def _settled_elsewhere(self, trial: optuna.Trial) -> bool:
        """Whether ``trial`` was finished by another process while we measured it: two processes popped the same
        enqueued trial (SQLite cannot lock the row between read and update), or a stale sweep failed it while
        this process was too busy to beat. Its record stands; ours is dropped, and `_refresh` counts theirs."""
        try:
            return self.study._storage.get_trial(trial._trial_id).state.is_finished()
        except Exception:
            return False

    def _progress(self) -> None:
        if self.on_progress:
            self.on_progress(
                Progress(
                    measured=self.report.measured_total,
                    target=self.settings.trials,
                    rejected=self.report.rejected_now,
                    duplicates=self.report.duplicates_now,
                    failures=sum(self.report.failures.values()),
                    best=self._best,
                )
            )

    def _close_interrupted(self, trial: optuna.Trial) -> None:
        try:
            self.claims.release(trial.number)
            trial.set_user_attr(studies.OUTCOME, studies.INTERRUPTED)
            self.study.tell(trial, state=TrialState.FAIL)
        except Exception:  # storage gone too: the next run's stale-trial sweep handles it
            pass

    def _abandon_pending(self) -> None:
        """Mark every trial still in flight as interrupted (failed), so none stays RUNNING."""
        for pending in list(self.pending.values()):
            for trial in [pending.trial, *pending.duplicates]:
                self._close_interrupted(trial)
        self.pending.clear()
        self.pending_keys.clear()

    # --- the loop -------------------------------------------------------------------------------------------
    def run(self) -> SearchReport:
        start = time.perf_counter()
        restarts0 = self.evaluator.restarts
        last_beat = last_refresh = time.monotonic()
        try:
            self._progress()
            while True:
                now = time.monotonic()
                if now - last_refresh >= self.settings.refresh_s:
                    with self.profile.optuna():
                        self._refresh()
                    last_refresh = now
                if now - last_beat >= self.settings.heartbeat_s:
                    self._beat([t for p in self.pending.values() for t in (p.trial, *p.duplicates)])
                    last_beat = now
                while (
                    self.report.stopped_early is None
                    and len(self.pending) < self.settings.in_flight
                    and self.report.measured_total + len(self.pending) < self.settings.trials
                    and self.claims.room()
                ):
                    if self._idle >= self.settings.patience:
                        self.report.stopped_early = (
                            f"{self._idle} proposals in a row were invalid or already measured"
                        )
                        break
                    with self.profile.optuna():
                        self._propose()
                if not self.pending and not self._wait_for_others():
                    break
                done, _ = wait(list(self.pending), timeout=1.0, return_when=FIRST_COMPLETED)
                # In trial order, so that a replayed search with a fixed seed is reproducible.
                for future in sorted(done, key=lambda f: self.pending[f].trial.number):
                    with self.profile.optuna():
                        self._finish(future)
                    self._progress()
        except BaseException as exc:
            studies.release_interrupted_write(exc)
            self._abandon_pending()
            raise
        self.report.restarts = self.evaluator.restarts - restarts0
        self.report.repaired_now = self.sampler.repaired
        self.report.moved_now = self.sampler.moved
        self._refresh()
        self._fail_stale()
        self.profile.wall_s = time.perf_counter() - start
        retime_start = time.perf_counter()
        self._rank()
        self.profile.retime_s = time.perf_counter() - retime_start
        self._count_failures()
        total = int(self.study.user_attrs.get("worker_restarts", 0)) + self.report.restarts
        self.study.set_user_attr("worker_restarts", total)
        self.report.wall_s = time.perf_counter() - start
        return self.report

    def _count_failures(self) -> None:
        """Failures over the whole study (earlier runs included), by kind, with one example each."""
        failures: collections.Counter = collections.Counter()
        for known in self.known.values():
            if known.state == TrialState.FAIL:
                kind = known.attrs.get(studies.FAILURE, "?")
                failures[kind] += 1
                self.report.failure_examples.setdefault(kind, known.attrs.get(studies.REASON, ""))
        self.report.failures = failures

    def _rank(self) -> None:
        """Re-time the best few and the default together, interleaved; the winner is the fastest re-timed."""
        ranked = rank(self.known.values(), self.space, self.shape, self.evaluator, self.settings.retime_top,
                      self.settings.retime_rounds)  # fmt: skip
        if not ranked:
            return
        default_key = config_key(self.space.default_config)
        self.report.ranking = ranked
        self.report.default = next((r for r in ranked if config_key(r.config) == default_key), None)
        self.study.set_user_attr(
            "retime",
            {
                "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "rounds": self.settings.retime_rounds,
                "times_ms": {str(r.trial_number): r.time_ms for r in ranked if r.retimed},
            },
        )


def check_trials(trials: int) -> None:
    if trials < 1:
        raise InvalidArgument(f"--trials must be at least 1, got {trials}")


def tune(
    kernel: str,
    shape: str | Shape | None = None,
    *,
    trials: int = 200,
    dtype: str | None = None,
    db: str | None = None,
    sampler: str = DEFAULT_SAMPLER,
    seed: int | None = None,
    timeout_s: float | None = None,
    hot_cache: bool = False,
    domains: dict[str, list[Any]] | None = None,
    replay: str | None = None,
    evaluator: Evaluator | None = None,
    template_hash: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    settings: SearchSettings | None = None,
    warm_start: bool = True,
    from_study: str | None = None,
    devices: Sequence[int] | None = None,
) -> SearchReport:
    """Search the configurations of ``kernel`` at ``shape`` and store the fastest valid one.

    A new study is warm-started (``warm_start``): the leaders of the same kernel at the nearest tuned shapes
    and on devices of the same architecture, and of ``from_study``, are measured first (`autotune.tuning.warmstart`).
    ``devices``: CUDA ordinals of GPUs of one model that measure for this one study (default: GPU 0).

    Everything is checked before anything is written: bad arguments, the database location, nvcc and the GPU.
    ``domains`` narrows parameters to subsets of their values. ``replay``: a recording file
    (`autotune.tuning.evaluation.RecordedMeasurements`) answers instead of the GPU — a simulation over the recorded,
    narrowed space. ``evaluator`` replaces the GPU outright; ``template_hash`` then names the template it measured.
    """
    if replay is not None:
        from autotune.tuning.evaluation.replay import RecordedMeasurements, ReplayEvaluator

        if devices is not None:  # a replay measures nothing: GPUs named beside it would be silently ignored
            raise InvalidArgument("--devices and --replay exclude each other: a replay answers from its recording, "
                                  "not from GPUs")  # fmt: skip
        recording = RecordedMeasurements.load(replay)
        if recording.kernel != get_space(kernel).name:
            raise InvalidArgument(f"replay file {replay} holds {recording.kernel}, not {kernel}")
        recorded = recording.dtype or get_space(kernel).dtype  # files from before dtypes: the kernel's first
        wanted = get_space(kernel, dtype=dtype).dtype if dtype is not None else recorded  # "bf16" → "bfloat16"
        if wanted != recorded:
            raise InvalidArgument(f"replay file {replay} was recorded for {recording.kernel} {recorded}, not {wanted}")
        dtype = recorded
        try:
            get_space(kernel, recording.domains, dtype=dtype)
        except InvalidArgument as exc:  # e.g. a parameter the template has since lost: say which file is at fault
            raise InvalidArgument(f"replay file {replay} does not fit {recording.kernel} {dtype} here: {exc}") from None
        domains = recording.domains
        evaluator, template_hash = ReplayEvaluator(recording), recording.template_hash
        if shape is None:
            shape = recording.shape
    space = get_space(kernel, domains, dtype=dtype)
    if shape is None:
        shape_t: Shape = space.default_shape
    elif isinstance(shape, str):
        shape_t = space.parse_shape(shape)
    else:
        shape_t = tuple(int(d) for d in shape)
    check_trials(trials)
    if replay is not None and tuple(shape_t) != tuple(recording.shape):
        raise InvalidArgument(
            f"replay file {replay} was recorded at {format_shape(recording.shape)}, not {format_shape(shape_t)}"
        )
    if timeout_s is not None and not timeout_s > 0:
        raise InvalidArgument(f"--timeout must be positive, got {timeout_s}")
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    sampler_obj = make_sampler(sampler, seed)
    url = resolve_url(db)
    check_database(url, create=True)

    owned = evaluator is None
    if evaluator is None:
        from autotune.runtime.compiler import find_nvcc
        from autotune.tuning.evaluation.gpu import GpuEvaluator

        find_nvcc()  # fail before starting the GPU worker
        template_hash = space.template_hash()
        options = dict(seed=seed, timeout_s=timeout_s, flush_l2=not hot_cache)
        if devices is not None and len(devices) > 1:
            from autotune.tuning.evaluation.multi import MultiGpuEvaluator

            evaluator = MultiGpuEvaluator(space, shape_t, devices, **options)
        else:
            evaluator = GpuEvaluator(space, shape_t, device_ordinal=devices[0] if devices else 0, **options)
    elif template_hash is None:
        template_hash = space.template_hash()
    try:
        space.for_problem(shape_t, evaluator.device)  # some algorithm can compute this shape here: before writing
        database = Database(url)
        storage = None
        try:
            run_settings = dataclasses.replace(
                settings or SearchSettings(trials=trials), trials=trials, sampler=sampler, seed=seed
            )
            jobs = getattr(getattr(evaluator, "compiler", None), "jobs", None)
            if settings is None and owned and jobs:
                # Compilation is the bottleneck of a cold search: every nvcc job stays busy while a few compiled
                # candidates wait for, or are on, the GPU(s).
                gpus = len(getattr(evaluator, "evaluators", ())) or 1
                run_settings.in_flight = max(run_settings.in_flight, jobs + 2 * gpus)
            storage = database.optuna_storage(heartbeat_s=run_settings.heartbeat_s)
            name = studies.study_name(space.name, format_shape(shape_t), space.dtype, evaluator.device,
                                      template_hash, hot_cache=hot_cache)  # fmt: skip
            attributes = studies.attributes(space, shape_t, evaluator, template_hash, hot_cache)
            if from_study is not None:
                from autotune.tuning.warmstart import find_study

                from_study = find_study(storage, from_study)
            study = studies.open_study(storage, name, sampler_obj, attributes, refresh_s=run_settings.refresh_s)
            study.set_user_attr(studies.SAMPLER, sampler)
            # Last: a joining host that waits for the target finds the sampler and the space already written.
            study.set_user_attr(studies.TARGET, trials)  # what hosts joining with `autotune worker` aim at
            seeds = []
            if warm_start and not study.trials:
                from autotune.tuning import warmstart

                seeds = warmstart.seeds(storage, space, shape_t, evaluator.device, trials, from_study=from_study,
                                        exclude=name)
            return run_study(database, storage, study, space, shape_t, evaluator, template_hash, run_settings,
                             on_progress=on_progress, seeds=seeds)  # fmt: skip
        finally:
            if storage is not None:
                storage.engine.dispose()  # close Optuna's connections now: SQLite checkpoints here, not at GC
            database.close()
    finally:
        if owned:
            evaluator.close()


def run_study(
    database: Database,
    storage: Any,
    study: optuna.Study,
    space: KernelSpace,
    shape: Shape,
    evaluator: Evaluator,
    template_hash: str,
    settings: SearchSettings,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    seeds: Sequence[tuple[Config, str]] = (),
) -> SearchReport:
    """Search an opened study to its target and store its winner (`tune`, and hosts joining a study)."""
    liveness = studies.Liveness(storage, settings.heartbeat_s)
    claims = Claims(database.engine, study.study_name, settings.trials)
    search = Search(space, shape, evaluator, study, settings, on_progress=on_progress, liveness=liveness,
                    seeds=seeds, claims=claims)  # fmt: skip
    report = search.run()
    if report.best is not None:
        database.save_best(winner_entry(report, space, evaluator, template_hash))
    return report
