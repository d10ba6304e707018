"""What `autotune.results.studies.LocalTrials` holds back of a trial, and the one transaction that writes it.

A proposal suggests a dozen parameters and the search sets a few user attributes, and Optuna commits each on its
own (most of the driver's database time, issue 12). A parameter whose distribution this process has already
written once, and every user attribute, is held back and written, all of a trial's together in one transaction,
before anything else about that trial is written or read from the database; so, as Optuna promises, a trial's
parameters and attributes reach the database before its state does.

On SQLite the transaction is `autotune.results.trial_rows.TrialRows`'s (plain SQL), which can also carry a system
attribute or the trial's finished state and values. Elsewhere it goes through Optuna's RDB storage: private API,
unavoidably (its public API commits each write on its own): the storage's private session helper, its models and
``_set_trial_attr_without_commit``. ``tests/test_studies.py`` pins the Optuna version this was checked against.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.storages._rdb import models as rdb_models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import TrialState

from autotune.results.trial_rows import Held, TrialRows


class HeldWrites:
    """Parameters and user attributes held back per trial, and their writes to ``backend``'s database (through
    ``rows`` where given, else Optuna's ORM). Thread-safe: its own lock guards what is held
    (taken inside `LocalTrials`' lock, never around it)."""

    def __init__(self, backend: optuna.storages.RDBStorage, rows: TrialRows | None) -> None:
        self.backend = backend
        self.rows = rows
        self._lock = threading.Lock()
        self._params: dict[int, Held] = {}  # trial id → parameters to write
        self._attrs: dict[int, dict[str, Any]] = {}  # trial id → user attributes to write

    def hold_param(self, trial_id: int, name: str, value: float,
                   distribution: optuna.distributions.BaseDistribution) -> None:  # fmt: skip
        with self._lock:
            self._params.setdefault(trial_id, []).append((name, value, distribution))

    def hold_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        with self._lock:
            self._attrs.setdefault(trial_id, {})[key] = value

    def _take(self, trial_id: int) -> tuple[Held | None, dict[str, Any] | None]:
        """What the trial holds back, no longer held."""
        with self._lock:
            return self._params.pop(trial_id, None), self._attrs.pop(trial_id, None)

    def write(self, trial_id: int) -> None:
        """Write what the trial holds back, if anything, in one transaction."""
        params, attrs = self._take(trial_id)
        if not params and not attrs:
            return
        if self.rows is not None:
            with contextlib.suppress(sa.exc.IntegrityError):  # ignored, as Optuna's storage and the ORM path below
                self.rows.write(trial_id, params, attrs)
            return
        # Private: one transaction for all of them (Optuna's public storage API commits each write on its own).
        with _create_scoped_session(self.backend.scoped_session, True) as session:
            trial = rdb_models.TrialModel.find_or_raise_by_id(trial_id, session)
            self.backend.check_trial_is_updatable(trial_id, trial.state)
            if params:
                rows = [{"trial_id": trial_id, "param_name": name, "param_value": value,
                         "distribution_json": optuna.distributions.distribution_to_json(distribution)}
                        for name, value, distribution in params]  # fmt: skip
                session.execute(sa.insert(rdb_models.TrialParamModel), rows)
            for key, value in (attrs or {}).items():
                self.backend._set_trial_attr_without_commit(session, rdb_models.TrialUserAttributeModel, trial_id,
                                                            key, value)  # fmt: skip

    def write_all(self) -> None:
        """Write everything held back (of all trials)."""
        with self._lock:
            trial_ids = list({*self._params, *self._attrs})
        for trial_id in trial_ids:
            self.write(trial_id)

    def write_with_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        """A system attribute, with whatever the trial holds back, in one transaction (``rows`` only)."""
        assert self.rows is not None
        json.dumps(value)  # refused before anything held is taken
        params, attrs = self._take(trial_id)
        with contextlib.suppress(sa.exc.IntegrityError):  # ignored, as Optuna's set_trial_system_attr does
            self.rows.write(trial_id, params, attrs, {key: value})

    def settle(self, trial_id: int, state: TrialState, values: Any) -> bool:
        """A finished state, with the values and everything the trial holds back, in one transaction (``rows``
        only; as Optuna's ``set_trial_state_values``: False where the database refused it for an integrity error)."""
        assert self.rows is not None
        params, attrs = self._take(trial_id)
        try:
            self.rows.write(trial_id, params, attrs, state=state, values=values)
        except sa.exc.IntegrityError:
            return False
        return True
