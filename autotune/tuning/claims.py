"""Claims: the configurations a study measures, shared by every process that searches it.

A process measures a configuration only after it has claimed it: a row (study, configuration key, trial number)
in ``autotune_claims``, unique per study and configuration, so two processes never measure the same one. Each
claiming transaction first updates the study's row in ``autotune_claim_locks``, which serialises the claims of
a study across processes (a row lock on PostgreSQL; on SQLite the first statement takes the write lock), so the
check that the configuration is free and the count of the study's claims against its target are one step with
the insert: the study never holds more measured trials than its target, however many processes search it.

A claim lasts as long as its trial is in flight or measured. A trial that ends without a result (interrupted,
or failed by the stale sweep after its process died) gives its claim up: its own process releases it at once
where it can, and `Claims.reconcile` releases any left behind (a killed process's), so a crash never blocks a
configuration. Without a claim a proposal is moved (`autotune.tuning.proposals`), or settled unmeasured
(`settle_unclaimed`).

Before claims (schema 1), processes on one study measured the same configuration again and ran past the target:
in the issue's replay of two processes, 169 of 640 measured trials on SQLite repeated a configuration, and the
studies ended 40 to 58 trials over. `benchmarks/concurrent_search.py` counts both, for 2 and 4 processes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
from typing import Callable, Iterable, Iterator

import optuna
import sqlalchemy as sa
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from autotune.results import studies
from autotune.results.storage import Claim as Row
from autotune.results.storage import ClaimLock
from autotune.spaces.base import Config, config_key


# The statements of every claim, as fixed SQL (portable: SQLite and PostgreSQL): built as SQLAlchemy Core
# statements they cost about 0.7 ms a claim, most of it building them and looking up their compiled form, once
# per proposal (issue 12); as text about 0.25 ms. The times are typed, so they are stored as the models store them.
_AT = sa.bindparam("at", type_=sa.DateTime)
_LOCK = sa.text("UPDATE autotune_claim_locks SET locked_at = :at WHERE study_name = :study").bindparams(_AT)
_HOLDER = sa.text("SELECT trial_number FROM autotune_claims WHERE study_name = :study AND config_key = :key")
_COUNT = sa.text("SELECT count(*) FROM autotune_claims WHERE study_name = :study")
_RELEASE = sa.text("DELETE FROM autotune_claims WHERE study_name = :study AND trial_number = :number")
_INSERT = sa.text("INSERT INTO autotune_claims (study_name, config_key, trial_number, claimed_at) "
                  "VALUES (:study, :key, :number, :at)").bindparams(_AT)  # fmt: skip


class Claim(enum.Enum):
    TAKEN = "taken"  # this trial measures the configuration
    HELD = "held"  # another trial measures it or has measured it
    TWICE = "twice"  # this very trial holds it already: another process took the same enqueued trial
    FULL = "full"  # the study's claims reach the target: nothing more is measured


class Claims:
    """The claims of one study in the database of ``engine``, for a search aiming at ``target`` measured trials."""

    def __init__(self, engine: Engine, study_name: str, target: int) -> None:
        self.engine = engine
        self.study = study_name
        self.target = target
        self.mine: dict[int, str] = {}  # trial number → key: the claims of this process's trials in flight
        self.elsewhere: set[str] = set()  # keys found held by other trials (forgotten at each refresh)
        self._lock_row = False

    def take(self, key: str, number: int) -> Claim:
        """Claim configuration ``key`` for trial ``number``; a claim this trial held on another key is given up."""
        if self.mine.get(number) == key:
            return Claim.TAKEN
        with self._locked() as conn:
            holder = conn.execute(_HOLDER, {"study": self.study, "key": key}).scalar()
            if holder == number:
                return Claim.TWICE
            if holder is not None:
                self.elsewhere.add(key)
                return Claim.HELD
            if self.mine.pop(number, None) is not None:
                conn.execute(_RELEASE, {"study": self.study, "number": number})
            if self._count(conn) >= self.target:
                return Claim.FULL
            conn.execute(_INSERT, {"study": self.study, "key": key, "number": number, "at": _now()})
        self.mine[number] = key
        return Claim.TAKEN

    def claim(self, config: Config, number: int) -> Claim:
        """`take` for a configuration (what `autotune.tuning.proposals.RepairingSampler` calls)."""
        return self.take(config_key(config), number)

    def release(self, number: int) -> None:
        """Give up the claim of this process's trial ``number``, which ends without a result."""
        if self.mine.pop(number, None) is not None:
            with self.engine.begin() as conn:
                conn.execute(_RELEASE, {"study": self.study, "number": number})

    def room(self) -> bool:
        """Whether the study's claims (measured and in flight, in every process) leave room below the target."""
        with self.engine.connect() as conn:
            return self._count(conn) < self.target

    def reconcile(self, trials: Iterable[FrozenTrial], key_of: Callable[[FrozenTrial], str]) -> int:
        """Bring the claims in line with the study's ``trials`` (``key_of``: a trial's configuration key). Claims of
        finished trials that measured nothing (interrupted, or failed by the stale sweep after their process died)
        or another configuration are released; measured configurations without a claim (trials measured before
        claims existed) are claimed. A running trial's claim stands. Returns how many claims were released."""
        measured: dict[str, int] = {}
        ended: dict[int, str | None] = {}  # finished trial → the configuration it measured (None: nothing)
        for t in trials:
            if studies.is_measured(t):
                ended[t.number] = key = key_of(t)
                measured.setdefault(key, t.number)
            elif t.state.is_finished():
                ended[t.number] = None
        with self._locked() as conn:
            rows = conn.execute(sa.select(Row.config_key, Row.trial_number).where(Row.study_name == self.study))
            claimed, stale = set(), []
            for key, number in rows:
                if number in ended and ended[number] != key:
                    stale.append(number)
                else:
                    claimed.add(key)
            if stale:
                conn.execute(sa.delete(Row).where(Row.study_name == self.study, Row.trial_number.in_(stale)))
            missing = [{"study_name": self.study, "config_key": key, "trial_number": number, "claimed_at": _now()}
                       for key, number in measured.items() if key not in claimed]  # fmt: skip
            if missing:
                conn.execute(sa.insert(Row), missing)
        for number in stale:
            self.mine.pop(number, None)
        return len(stale)

    def _count(self, conn: Connection) -> int:
        return conn.execute(_COUNT, {"study": self.study}).scalar()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Connection]:
        """A transaction holding the study's row of ``autotune_claim_locks``: the claims of a study are changed
        by one process at a time. On SQLite the update, the transaction's first statement, takes the write lock
        (waiting the busy timeout), so nothing read afterwards is stale."""
        if not self._lock_row:
            try:  # made once per study; a process that loses the race to make it finds it made
                with self.engine.begin() as conn:
                    conn.execute(sa.insert(ClaimLock).values(study_name=self.study, locked_at=_now()))
            except IntegrityError:
                pass
            self._lock_row = True
        with self.engine.begin() as conn:
            conn.execute(_LOCK, {"study": self.study, "at": _now()})
            yield conn


class Unshared:
    """The claims of a study that this process searches alone, with no database of ours (an in-memory study,
    `benchmarks/sampler_efficiency.py`): every configuration it does not know of is free."""

    def __init__(self) -> None:
        self.elsewhere: set[str] = set()  # stays empty

    def take(self, key: str, number: int) -> Claim:
        return Claim.TAKEN

    def claim(self, config: Config, number: int) -> Claim:
        return Claim.TAKEN

    def release(self, number: int) -> None:
        pass

    def room(self) -> bool:
        return True

    def reconcile(self, trials: Iterable[FrozenTrial], key_of: Callable[[FrozenTrial], str]) -> int:
        return 0


def settle_unclaimed(study: optuna.Study, trial: optuna.Trial, result: Claim) -> None:
    """Settle a trial whose configuration could not be claimed: it is not measured and counts for nothing. A
    trial that another process took as well (`Claim.TWICE`) is left to that process."""
    if result is Claim.TWICE:
        return
    if result is Claim.HELD:
        trial.set_user_attr(studies.OUTCOME, studies.DUPLICATE)
        trial.set_user_attr(studies.REASON, "measured, or being measured, by another process")
    else:
        trial.set_user_attr(studies.OUTCOME, studies.INTERRUPTED)
        trial.set_user_attr(studies.REASON, "the study holds its target with the trials in flight")
    try:
        study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
    except optuna.exceptions.UpdateFinishedTrialError:
        pass  # failed meanwhile by another process's stale sweep: nothing to settle


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
