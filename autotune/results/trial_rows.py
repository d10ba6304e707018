"""A trial's rows in Optuna's SQLite schema, written in one short SQLAlchemy Core transaction each.

Optuna's RDB storage writes through the ORM: each write opens a session, loads the trial, checks that it may
be updated, and (for an attribute) looks for an existing row before it inserts one. A search's trial took about
ten such writes (created, relative parameters for the constant liar, parameters, five user attributes, value,
state), 6 to 8 ms of the driver's time per trial (issue 12). `TrialRows` writes the same rows, with the same
checks, as Core statements: a new trial in one transaction, and everything a trial holds back (parameters,
user and system attributes) with its value and state in another. The first statement of each is a write, so
on SQLite it takes the write lock before anything is read and nothing read is stale.

The check that the trial may be updated is the update itself: ``UPDATE trials ... WHERE state IN (RUNNING,
WAITING)``; no row updated means the trial is finished (another process settled it: Optuna's
``UpdateFinishedTrialError``) or missing (``KeyError``, as Optuna's ``find_or_raise_by_id``).

Private API, unavoidably: the table definitions are Optuna's private ``optuna.storages._rdb.models`` (there is
no public schema). ``tests/test_studies.py`` pins the Optuna version they were checked against, and
``tests/test_trial_rows.py`` compares what is written with what Optuna's own storage writes. SQLite only (the
default database, and the one the driver's cost was measured on): other databases keep Optuna's writes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from typing import Any, Iterator, Sequence

import optuna
import sqlalchemy as sa
from optuna.distributions import BaseDistribution, distribution_to_json
from optuna.storages._rdb import models
from optuna.trial import TrialState
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

_TRIALS = models.TrialModel.__table__
_PARAMS = models.TrialParamModel.__table__
_VALUES = models.TrialValueModel.__table__
_USER_ATTRS = models.TrialUserAttributeModel.__table__
_SYSTEM_ATTRS = models.TrialSystemAttributeModel.__table__
_HEARTBEATS = models.TrialHeartbeatModel.__table__
_STUDIES = models.StudyModel.__table__
_UPDATABLE = (TrialState.RUNNING, TrialState.WAITING)

Held = list[tuple[str, float, BaseDistribution]]  # (name, internal value, distribution) of parameters


def supported(storage: Any) -> bool:
    """Whether `TrialRows` writes to this storage's database (Optuna's RDB storage on SQLite); otherwise Optuna's
    own writes are used."""
    return isinstance(storage, optuna.storages.RDBStorage) and storage.engine.dialect.name == "sqlite"


def utc_now() -> dt.datetime:
    """Now, as Optuna stores trial times: naive UTC."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def local(utc: dt.datetime) -> dt.datetime:
    """A stored (naive UTC) time as Optuna's FrozenTrial holds it: naive local."""
    return utc.replace(tzinfo=dt.timezone.utc).astimezone().replace(tzinfo=None)


class TrialRows:
    """Core writes of trials' rows to ``storage``'s database (see the module)."""

    def __init__(self, storage: optuna.storages.RDBStorage) -> None:
        self.storage = storage
        self.engine = storage.engine

    def create(self, study_id: int) -> tuple[int, int, dt.datetime]:
        """A new RUNNING trial of the study: (trial id, number, start as naive UTC). Numbered as Optuna numbers
        it: by the trials of the study created before it, counted in the transaction that inserts it."""
        start = utc_now()
        with self._transaction() as conn:
            inserted = conn.execute(sa.insert(_TRIALS).values(number=None, study_id=study_id,
                                                              state=TrialState.RUNNING, datetime_start=start))  # fmt: skip
            trial_id = inserted.inserted_primary_key[0]
            if conn.execute(sa.select(_STUDIES.c.study_id).where(_STUDIES.c.study_id == study_id)).first() is None:
                raise KeyError(models.NOT_FOUND_MSG)  # rolled back with the trial
            number = conn.execute(sa.select(sa.func.count(_TRIALS.c.trial_id))
                                  .where(_TRIALS.c.study_id == study_id, _TRIALS.c.trial_id < trial_id)).scalar()  # fmt: skip
            conn.execute(sa.update(_TRIALS).where(_TRIALS.c.trial_id == trial_id).values(number=number))
        return trial_id, number, start

    def write(
        self,
        trial_id: int,
        params: Held | None = None,
        user_attrs: dict[str, Any] | None = None,
        system_attrs: dict[str, Any] | None = None,
        state: TrialState | None = None,
        values: Sequence[float] | None = None,
    ) -> None:
        """Write a trial's parameters and attributes, and (``state``) its values and new state, in one
        transaction, if it may still be updated (else ``UpdateFinishedTrialError``, or ``KeyError`` where there
        is no such trial, and nothing is written)."""
        with self._transaction() as conn:
            change: dict[str, Any] = {"state": _TRIALS.c.state}  # unchanged: the update only checks and locks
            if state is not None:
                change["state"] = state
                if state.is_finished():
                    change["datetime_complete"] = utc_now()
            updated = conn.execute(sa.update(_TRIALS).values(**change)
                                   .where(_TRIALS.c.trial_id == trial_id, _TRIALS.c.state.in_(_UPDATABLE)))  # fmt: skip
            if updated.rowcount == 0:
                self._refuse(conn, trial_id)
            if params:
                conn.execute(sa.insert(_PARAMS), [
                    {"trial_id": trial_id, "param_name": name, "param_value": value,
                     "distribution_json": distribution_to_json(distribution)}
                    for name, value, distribution in params])  # fmt: skip
            self._upsert(conn, _USER_ATTRS, ("trial_id", "key"), "value_json",
                         [{"trial_id": trial_id, "key": k, "value_json": json.dumps(v)} for k, v in (user_attrs or {}).items()])  # fmt: skip
            self._upsert(conn, _SYSTEM_ATTRS, ("trial_id", "key"), "value_json",
                         [{"trial_id": trial_id, "key": k, "value_json": json.dumps(v)} for k, v in (system_attrs or {}).items()])  # fmt: skip
            rows = []
            for objective, value in enumerate(values or ()):
                stored, kind = models.TrialValueModel.value_to_stored_repr(value)
                rows.append({"trial_id": trial_id, "objective": objective, "value": stored, "value_type": kind})
            self._upsert(conn, _VALUES, ("trial_id", "objective"), ("value", "value_type"), rows)

    def beat(self, trial_id: int) -> None:
        """Record the trial's heartbeat now (Optuna's ``record_heartbeat``, as one statement)."""
        stmt = sqlite.insert(_HEARTBEATS).values(trial_id=trial_id, heartbeat=sa.func.current_timestamp())
        with self._transaction() as conn:
            conn.execute(stmt.on_conflict_do_update(index_elements=[_HEARTBEATS.c.trial_id],
                                                    set_={"heartbeat": sa.func.current_timestamp()}))  # fmt: skip

    def _refuse(self, conn: Connection, trial_id: int) -> None:
        found = conn.execute(sa.select(_TRIALS.c.number).where(_TRIALS.c.trial_id == trial_id)).first()
        if found is None:
            raise KeyError(models.NOT_FOUND_MSG)
        raise optuna.exceptions.UpdateFinishedTrialError(
            f"Trial#{found[0]} has already finished and can not be updated."
        )

    @staticmethod
    def _upsert(conn: Connection, table: sa.Table, keys: tuple[str, ...], columns: str | tuple[str, ...],
                rows: list[dict[str, Any]]) -> None:  # fmt: skip
        if not rows:
            return
        stmt = sqlite.insert(table)
        names = (columns,) if isinstance(columns, str) else columns
        conn.execute(stmt.on_conflict_do_update(index_elements=[table.c[k] for k in keys],
                                                set_={n: stmt.excluded[n] for n in names}), rows)  # fmt: skip

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """``engine.begin()``, with errors as Optuna's storage raises them: a database error other than an integrity
        error is ``StorageInternalError``."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.IntegrityError:
            raise
        except sa.exc.SQLAlchemyError as error:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from error
