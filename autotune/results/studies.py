"""Optuna studies of autotune: their names, their attributes, and what our trials record.

One study per (kernel, shape, dtype, device, template): ``gemm-4096x4096x4096-f32-nvidia-h200-1a2b3c4d``. The template's
short hash is in the name because times measured with another version of the template are not comparable:
editing a template starts a new study, re-running the same command resumes the old one.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
import traceback
import warnings
from typing import TYPE_CHECKING, Any, Container

import optuna
import sqlalchemy as sa

# Optuna's private API, used by `LocalTrials` alone (it has no public counterpart; see the class). Written against
# the Optuna version that tests/test_studies.py::test_the_optuna_version_the_private_api_was_checked_against names:
# on another version, re-check what that test lists before changing it.
from optuna.storages._cached_storage import _CachedStorage, _StudyInfo
from optuna.trial import TrialState

from autotune.device import DeviceInfo
from autotune.results.held_writes import HeldWrites
from autotune.results.trial_rows import TrialRows
from autotune.results.trial_rows import supported as trial_rows_supported
from autotune.shape import Shape, format_shape
from autotune.templates import short_hash

if TYPE_CHECKING:
    from autotune.spaces.base import KernelSpace
    from autotune.tuning.evaluation.base import Evaluator

# User attributes of our trials (visible in optuna-dashboard).
OUTCOME = "outcome"  # "measured" | "rejected" | "duplicate" | "interrupted"
ROLE = "role"  # "default" on the trial of the template's default configuration
METRIC = "metric"  # TFLOP/s or GB/s (see the study's metric_unit)
REGISTERS = "registers"
FAILURE = "failure"  # one of autotune.tuning.evaluation.FAILURE_KINDS
REASON = "reason"  # one line: why it failed or was rejected
MEASUREMENT = "measurement"  # the whole Measurement as a dict (timing quartiles, compile time, …)
DUPLICATE_OF = "duplicate_of"  # trial number whose result answered this proposal
SEED_FROM = "seed_from"  # on a warm-start seed (role "seed"): the study and trial it was taken from
TARGET = "target_trials"  # study attribute: the --trials of the latest search (what `autotune worker` aims at)
SAMPLER = "sampler"  # study attribute: the sampler of the latest search
SEED = "seed"  # role of a warm-start trial
RULE = "rule"  # role of the trial of the space's rule-based default for the searched shape

MEASURED, REJECTED, DUPLICATE, INTERRUPTED = "measured", "rejected", "duplicate", "interrupted"


def study_name(
    kernel: str, shape: str, dtype: str, device: DeviceInfo, template_hash: str, *, hot_cache: bool = False
) -> str:
    from autotune.dtypes import dtype as dtype_of

    name = f"{kernel}-{shape}-{dtype_of(dtype).short}-{device.slug}-{short_hash(template_hash)}"
    return name + "-hot" if hot_cache else name


def attributes(
    space: KernelSpace, shape: Shape, evaluator: Evaluator, template_hash: str, hot_cache: bool
) -> dict[str, Any]:
    """What a new study records about itself (visible in optuna-dashboard)."""
    return {
        "kernel": space.name,
        "shape": format_shape(shape),
        "dtype": space.dtype,
        "metric_unit": space.metric_unit,
        "device": evaluator.device.to_dict(),
        "nvcc": evaluator.toolchain.nvcc,
        "template_hash": template_hash,
        "space": type(space).ref(),
        "domains": {p.name: list(p.values) for p in space.params},
        "l2_flush": not hot_cache,
    }


def open_study(
    storage: Any,
    name: str,
    sampler: optuna.samplers.BaseSampler,
    attributes: dict[str, Any],
    *,
    refresh_s: float | None = None,
) -> optuna.Study:
    """Create the study, or load it to resume; a new study is given ``attributes``. ``refresh_s``: read other
    processes' trials at most this often (`LocalTrials`); None reads the database at every look."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if refresh_s is not None and isinstance(storage, optuna.storages.RDBStorage):
        storage = LocalTrials(storage, refresh_s)
    study = optuna.create_study(
        storage=storage, study_name=name, sampler=sampler, direction="minimize", load_if_exists=True
    )
    if not study.user_attrs:
        for key, value in attributes.items():
            study.set_user_attr(key, value)
    return study


def release_interrupted_write(exc: BaseException) -> None:
    """Let go of what a database write cut short by ``exc`` still holds, before the clean-up writes again.

    A KeyboardInterrupt inside a write makes SQLAlchemy close that SQLite connection, but a closed connection
    keeps its transaction, and the write lock, while any of its statements lives; the frames of the exception's
    traceback hold the cursor. The clean-up's next write then waited the whole busy timeout (120 s) for a lock
    held by its own process. The traceback keeps its lines; only the frames' local variables go."""
    traceback.clear_frames(exc.__traceback__)


def is_measured(trial: optuna.trial.FrozenTrial) -> bool:
    """A trial that counts toward --trials: a candidate that was compiled and (if it compiled) run.

    A failed one counts only with its failure recorded: a process killed while writing a result leaves a trial
    RUNNING that the stale sweep fails later — never measured, so its configuration is measured again."""
    if trial.user_attrs.get(OUTCOME) != MEASURED:
        return False
    if trial.state == TrialState.COMPLETE:
        return True
    return trial.state == TrialState.FAIL and FAILURE in trial.user_attrs


def is_interrupted(trial: optuna.trial.FrozenTrial) -> bool:
    """Failed without a result: stopped by Ctrl-C, or left by a killed process and failed by the stale sweep."""
    return trial.state == TrialState.FAIL and not is_measured(trial) and trial.user_attrs.get(OUTCOME) not in (
        REJECTED, DUPLICATE)


def trial_id(trial: optuna.Trial, study_id: int | None = None) -> int:
    """The storage's id of a trial, through Optuna's public storage API (`optuna.Trial` keeps its own private).
    ``study_id``: its study's id where known (else looked up by the study's name)."""
    storage = trial.storage
    if study_id is None:
        study_id = storage.get_study_id_from_name(trial.study.study_name)
    return storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)


class LocalTrials(_CachedStorage):
    """Optuna's cached storage that reads the database at most every ``refresh_s`` seconds.

    Optuna's own cache keeps finished trials but reads every unfinished one again at each look, and TPE with a
    constant liar looks at every trial once per parameter group of every proposal: with 16 candidates in flight
    that was most of the driver's time (issue 12). This process writes its own trials through here, so each write
    is applied to the cached copy as well; only other processes' trials (joining hosts) are seen up to
    ``refresh_s`` late, which the samplers tolerate as they tolerate trials still in flight. A running trial
    this process asked for is read from the cache (it alone writes it); settling one twice is still caught, by the
    database, which refuses to update a finished trial.

    On SQLite this process's trials are written by `autotune.results.trial_rows.TrialRows` (plain SQL, a tenth of
    the ORM's cost): created in one transaction, and settled with everything held back in another.

    Private API, unavoidably: Optuna offers no public way to cache a storage's trials, to hold writes back or to
    batch them. This class extends ``_CachedStorage`` (its lock, ``_studies`` and ``_trial_id_to_study_id_and_number``
    caches, and the ``_read_trials_from_remote_storage`` hook it overrides); the held-back parameters and
    attributes are written by `autotune.results.held_writes.HeldWrites` (the RDB storage's private session helper
    and models where it is not SQLite). Everything else it calls is public (`optuna.storages.BaseStorage`'s
    methods, `FrozenTrial`'s properties). The test that pins Optuna's version lists what to re-check.
    """

    def __init__(self, backend: optuna.storages.RDBStorage, refresh_s: float) -> None:
        super().__init__(backend)
        self.backend = backend  # the database (our reference: _CachedStorage keeps its own private)
        self.refresh_s = refresh_s
        self._read_at: dict[int, float] = {}
        self._asked: set[int] = set()  # running trials this process asked for (it alone writes them)
        self._listed: dict[tuple[int, Any], list[optuna.trial.FrozenTrial]] = {}  # (study, states) → trials in order
        self._make_writers()

    def _make_writers(self) -> None:
        # Lean writes of our trials' rows where the database allows (autotune.results.trial_rows)
        self._rows = TrialRows(self.backend) if trial_rows_supported(self.backend) else None
        self._held = HeldWrites(self.backend, self._rows)  # parameters and user attributes held back

    def __getstate__(self) -> dict[Any, Any]:
        self.write_pending()
        state = super().__getstate__()
        state["_read_at"] = {}
        state["_asked"] = set()
        state["_listed"] = {}
        del state["_rows"], state["_held"]  # their engine and lock do not travel: made again from the copy's backend
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        self._make_writers()

    def _read_trials_from_remote_storage(self, study_id: int) -> None:
        now = time.monotonic()
        if study_id in self._read_at and now - self._read_at[study_id] < self.refresh_s:
            return
        self.write_pending()  # the copies about to be read must not lack parameters this process holds back
        super()._read_trials_from_remote_storage(study_id)
        self._read_at[study_id] = now

    # Parameters and user attributes are held back and written, all of a trial's in one transaction, before
    # anything else about that trial is written or read from the database (autotune.results.held_writes).
    def write_pending(self) -> None:
        """Write everything held back (of all trials)."""
        self._held.write_all()

    def create_new_trial(self, study_id: int, template_trial: optuna.trial.FrozenTrial | None = None) -> int:
        if self._rows is not None and template_trial is None:
            trial_id, frozen = self._rows.create(study_id)
            with self._lock:  # as _CachedStorage.create_new_trial caches the trial Optuna's storage returns
                self._studies.setdefault(study_id, _StudyInfo())
                self._add_trials_to_cache(study_id, [frozen])
        else:
            trial_id = super().create_new_trial(study_id, template_trial)
        if template_trial is None or template_trial.state == TrialState.RUNNING:
            self._asked.add(trial_id)
        return trial_id

    def get_trial(self, trial_id: int) -> optuna.trial.FrozenTrial:
        # A trial this process asked for and has not settled is written only by this process (through here), so
        # the cached copy is current; a stale sweep by another process that failed it meanwhile is caught when
        # this process settles it (the database refuses to update a finished trial; see set_trial_state_values).
        if trial_id in self._asked:
            with self._lock:
                trial = self._cached(trial_id)
                if trial is not None and trial.state == TrialState.RUNNING:
                    return _copy_running(trial)
        self._held.write(trial_id)
        return super().get_trial(trial_id)

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Container[TrialState] | None = None) -> list[optuna.trial.FrozenTrial]:  # fmt: skip
        # As _CachedStorage's (in trial order), but each listing is kept until the cache changes (a trial added or
        # read again, or its state set): TPE lists all trials once per parameter group of every proposal.
        self._read_trials_from_remote_storage(study_id)
        key = (study_id, None if states is None else frozenset(states))
        with self._lock:
            listed = self._listed.get(key)
            if listed is None:
                cached = self._studies[study_id].trials
                ordered = [cached[number] for number in sorted(cached)]
                listed = self._listed[key] = ordered if states is None else [t for t in ordered if t.state in states]
            trials = list(listed)  # the caller's own list
        return copy.deepcopy(trials) if deepcopy else trials

    def _add_trials_to_cache(self, study_id: int, trials: list[optuna.trial.FrozenTrial]) -> None:
        self._listed.clear()  # (called with the lock held, by _CachedStorage and create_new_trial)
        super()._add_trials_to_cache(study_id, trials)

    def delete_study(self, study_id: int) -> None:
        with self._lock:
            self._listed.clear()
        super().delete_study(study_id)

    def get_best_trial(self, study_id: int) -> optuna.trial.FrozenTrial:
        self.write_pending()
        return super().get_best_trial(study_id)

    def _cached(self, trial_id: int) -> optuna.trial.FrozenTrial | None:
        """The cached copy of a trial (private: _CachedStorage's caches), None where there is none."""
        where = self._trial_id_to_study_id_and_number.get(trial_id)
        return None if where is None else self._studies[where[0]].trials.get(where[1])

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float,
                        distribution: optuna.distributions.BaseDistribution) -> None:  # fmt: skip
        with self._lock:
            study_id, _ = self._trial_id_to_study_id_and_number[trial_id]
            known = self._studies[study_id].param_distribution.get(param_name)
            if known is not None:  # written once already: checked here, written with the trial's next write
                optuna.distributions.check_distribution_compatibility(known, distribution)
                self._held.hold_param(trial_id, param_name, param_value_internal, distribution)
        if known is None:  # the first time: at once, checked against the database (another process's trials)
            try:
                super().set_trial_param(trial_id, param_name, param_value_internal, distribution)
            except optuna.exceptions.UpdateFinishedTrialError:
                self._asked.discard(trial_id)  # settled elsewhere: from now on read from the database
                raise
        with self._lock:
            trial = self._cached(trial_id)
            if trial is not None:
                trial.params = {**trial.params, param_name: distribution.to_external_repr(param_value_internal)}
                trial.distributions = {**trial.distributions, param_name: distribution}

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        json.dumps(value)  # refused here, as Optuna would, rather than at the trial's next write
        with self._lock:
            self._held.hold_user_attr(trial_id, key, value)
            trial = self._cached(trial_id)
            if trial is not None:
                trial.user_attrs = {**trial.user_attrs, key: value}

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        # Written at once (TPE's constant liar shares a running trial's proposal with other processes this way),
        # with whatever the trial holds back.
        if self._rows is not None:
            self._held.write_with_system_attr(trial_id, key, value)
        else:
            self._held.write(trial_id)
            super().set_trial_system_attr(trial_id, key, value)
        with self._lock:
            trial = self._cached(trial_id)
            if trial is not None:
                trial.system_attrs = {**trial.system_attrs, key: value}

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Any = None) -> bool:
        try:
            if self._rows is not None and state.is_finished():
                changed = self._held.settle(trial_id, state, values)
            else:
                self._held.write(trial_id)
                changed = super().set_trial_state_values(trial_id, state, values)
        except optuna.exceptions.UpdateFinishedTrialError:
            self._asked.discard(trial_id)  # settled elsewhere: from now on read from the database
            raise
        if state == TrialState.RUNNING and changed:  # an enqueued trial this process took
            self._asked.add(trial_id)
        elif state.is_finished():
            self._asked.discard(trial_id)
        if changed:
            with self._lock:
                self._listed.clear()  # listings by state change
                trial = self._cached(trial_id)
                if trial is not None:
                    trial.state = state
                    trial.values = list(values) if values is not None else None
                    now = dt.datetime.now()
                    if state == TrialState.RUNNING and trial.datetime_start is None:
                        trial.datetime_start = now
                    if state.is_finished():
                        trial.datetime_complete = now
        return changed


def _copy_running(trial: optuna.trial.FrozenTrial) -> optuna.trial.FrozenTrial:
    """A copy of a cached running trial whose dictionaries are its own (`optuna.Trial` adds to them as it
    suggests), sharing their values: what they hold (distributions, JSON values) nobody changes in place. A deep
    copy twice per trial was a tenth of the driver's TPE-free time."""
    copied = copy.copy(trial)
    copied.params = dict(trial.params)
    copied.distributions = dict(trial.distributions)
    copied.user_attrs = dict(trial.user_attrs)
    copied.system_attrs = dict(trial.system_attrs)
    copied.intermediate_values = dict(trial.intermediate_values)
    copied.values = None if trial.values is None else list(trial.values)
    return copied


class Liveness:
    """Heartbeats for in-flight trials, and the sweep that fails trials of processes that died.

    A trial is dead when its heartbeat is older than the grace period (Optuna's own stale-trial check), or —
    killed between `ask` and its first heartbeat — it has no heartbeat at all and started longer ago than the
    grace period. Every live process records a trial's first heartbeat right after asking for it.
    """

    def __init__(self, storage: Any, heartbeat_s: int) -> None:
        self.storage = storage  # optuna.storages.RDBStorage with heartbeat_interval=heartbeat_s
        self.grace_s = 4 * heartbeat_s
        self._study_ids: dict[str, int] = {}  # by name: looked up once
        self._trial_ids: dict[tuple[str, int], int] = {}  # by (study name, trial number): looked up once
        self._rows = TrialRows(storage) if trial_rows_supported(storage) else None  # one statement a beat

    def beat(self, trials: list[optuna.Trial]) -> None:
        for trial in trials:
            name = trial.study.study_name
            if name not in self._study_ids:
                self._study_ids[name] = trial.storage.get_study_id_from_name(name)
            key = (name, trial.number)
            if key not in self._trial_ids:
                self._trial_ids[key] = trial_id(trial, self._study_ids[name])
            if self._rows is not None:
                self._rows.beat(self._trial_ids[key])
            else:
                self.storage.record_heartbeat(self._trial_ids[key])

    def sweep(self, study: optuna.Study) -> int:
        if study.study_name not in self._study_ids:  # looked up now, before any trial is asked, rather than at the
            # first heartbeat, between an ask and its suggestions (where it would widen the window in which two
            # processes that popped the same enqueued trial race to settle it)
            self._study_ids[study.study_name] = self.storage.get_study_id_from_name(study.study_name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # optuna marks fail_stale_trials experimental
            optuna.storages.fail_stale_trials(study)
        cutoff = dt.datetime.now() - dt.timedelta(seconds=self.grace_s)  # optuna stores naive local times
        query = sa.text(
            "SELECT t.trial_id FROM trials t JOIN studies s ON s.study_id = t.study_id "
            "LEFT JOIN trial_heartbeats h ON h.trial_id = t.trial_id "
            "WHERE s.study_name = :name AND t.state = 'RUNNING' AND h.trial_id IS NULL AND t.datetime_start < :cutoff"
        )
        with self.storage.engine.connect() as conn:
            orphans = [row[0] for row in conn.execute(query, {"name": study.study_name, "cutoff": cutoff})]
        failed = 0
        for trial_id in orphans:
            try:
                failed += bool(self.storage.set_trial_state_values(trial_id, state=TrialState.FAIL))
            except optuna.exceptions.UpdateFinishedTrialError:
                pass  # another process settled it first
        return failed
