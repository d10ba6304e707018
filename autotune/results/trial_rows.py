"""A trial's rows in Optuna's SQLite schema, written as plain SQL in one short transaction per write.

Optuna's RDB storage writes through the ORM: each write opens a session, loads the trial, checks that it may
be updated, and (for an attribute) looks for an existing row before it inserts one. A search's trial took about
ten such writes (created, relative parameters for the constant liar, parameters, five user attributes, value,
state), 6 to 8 ms of the driver's time per trial (issue 12); built as SQLAlchemy Core statements the same
writes still cost about 1 ms each, most of it building and caching the statements. `TrialRows` writes the same
rows, with the same checks, as fixed SQL text through the connection (``exec_driver_sql``, about 0.1 ms): a new
trial in one transaction, and everything a trial holds back (parameters, user and system attributes) with its
value and state in another. The first statement of each is a write, so SQLite takes the write lock before
anything is read and nothing read is stale.

The check that the trial may be updated is the update itself: ``UPDATE trials ... WHERE state IN (RUNNING,
WAITING)``; no row updated means the trial is finished (another process settled it: Optuna's
``UpdateFinishedTrialError``) or missing (``KeyError``, as Optuna's ``find_or_raise_by_id``).

Private API, unavoidably: the tables are Optuna's (``optuna.storages._rdb.models``; there is no public schema),
stored as Optuna's SQLAlchemy models store them (enum names, SQLAlchemy's SQLite datetime format).
``tests/test_studies.py`` pins the Optuna version this was checked against, and ``tests/test_trial_rows.py``
compares what is written with what Optuna's own storage writes. SQLite only (the default database, and the one
the driver's cost was measured on): other databases keep Optuna's writes.
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
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.engine import Connection

_UPDATABLE = "('RUNNING', 'WAITING')"  # TrialState names, as Optuna's Enum column stores them
# SQLAlchemy's storage format for DateTime on SQLite (microseconds always written), which Optuna reads back.
_DATETIME = "%Y-%m-%d %H:%M:%S.%f"
_UPSERT_ATTR = ("INSERT INTO {table} (trial_id, key, value_json) VALUES (?, ?, ?) "
                "ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json")  # fmt: skip

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
    """Writes of trials' rows to ``storage``'s database as plain SQL (see the module)."""

    def __init__(self, storage: optuna.storages.RDBStorage) -> None:
        self.storage = storage
        self.engine = storage.engine

    def create(self, study_id: int) -> tuple[int, FrozenTrial]:
        """A new RUNNING trial of the study: its id, and the trial as Optuna's storage returns it. Numbered as
        Optuna numbers it: by the trials of the study created before it, counted in the transaction that inserts
        it."""
        start = utc_now()
        with self._transaction() as conn:
            inserted = conn.exec_driver_sql(
                "INSERT INTO trials (number, study_id, state, datetime_start) VALUES (NULL, ?, 'RUNNING', ?)",
                (study_id, start.strftime(_DATETIME)))
            trial_id = inserted.lastrowid
            if conn.exec_driver_sql("SELECT 1 FROM studies WHERE study_id = ?", (study_id,)).first() is None:
                raise KeyError(models.NOT_FOUND_MSG)  # rolled back with the trial
            number = conn.exec_driver_sql("SELECT count(trial_id) FROM trials WHERE study_id = ? AND trial_id < ?",
                                          (study_id, trial_id)).scalar()  # fmt: skip
            conn.exec_driver_sql("UPDATE trials SET number = ? WHERE trial_id = ?", (number, trial_id))
        return trial_id, FrozenTrial(number=number, state=TrialState.RUNNING, value=None, values=None,
                                     datetime_start=local(start), datetime_complete=None, params={},
                                     distributions={}, user_attrs={}, system_attrs={}, intermediate_values={},
                                     trial_id=trial_id)  # fmt: skip

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
            if state is None:  # unchanged: the update only checks, and takes the write lock
                updated = conn.exec_driver_sql(f"UPDATE trials SET state = state WHERE trial_id = ? AND state IN "
                                               f"{_UPDATABLE}", (trial_id,))  # fmt: skip
            else:
                complete = utc_now().strftime(_DATETIME) if state.is_finished() else None
                updated = conn.exec_driver_sql(
                    f"UPDATE trials SET state = ?, datetime_complete = coalesce(?, datetime_complete) "
                    f"WHERE trial_id = ? AND state IN {_UPDATABLE}", (state.name, complete, trial_id))
            if updated.rowcount == 0:
                self._refuse(conn, trial_id)
            if params:
                conn.exec_driver_sql(
                    "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) "
                    "VALUES (?, ?, ?, ?)",
                    [(trial_id, name, value, distribution_to_json(d)) for name, value, d in params])
            if user_attrs:
                conn.exec_driver_sql(_UPSERT_ATTR.format(table="trial_user_attributes"),
                                     [(trial_id, k, json.dumps(v)) for k, v in user_attrs.items()])  # fmt: skip
            if system_attrs:
                conn.exec_driver_sql(_UPSERT_ATTR.format(table="trial_system_attributes"),
                                     [(trial_id, k, json.dumps(v)) for k, v in system_attrs.items()])  # fmt: skip
            rows = []
            for objective, value in enumerate(values or ()):
                stored, kind = models.TrialValueModel.value_to_stored_repr(value)
                rows.append((trial_id, objective, stored, kind.name))
            if rows:
                conn.exec_driver_sql("INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES "
                                     "(?, ?, ?, ?) ON CONFLICT (trial_id, objective) DO UPDATE SET "
                                     "value = excluded.value, value_type = excluded.value_type", rows)  # fmt: skip

    def beat(self, trial_id: int) -> None:
        """Record the trial's heartbeat now (Optuna's ``record_heartbeat``, as one statement)."""
        with self._transaction() as conn:
            conn.exec_driver_sql(
                "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?, CURRENT_TIMESTAMP) "
                "ON CONFLICT (trial_id) DO UPDATE SET heartbeat = CURRENT_TIMESTAMP", (trial_id,))

    def _refuse(self, conn: Connection, trial_id: int) -> None:
        found = conn.exec_driver_sql("SELECT number FROM trials WHERE trial_id = ?", (trial_id,)).first()
        if found is None:
            raise KeyError(models.NOT_FOUND_MSG)
        raise optuna.exceptions.UpdateFinishedTrialError(
            f"Trial#{found[0]} has already finished and can not be updated."
        )

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
