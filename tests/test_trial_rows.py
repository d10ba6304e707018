"""autotune.results.trial_rows: our trials' rows, written as plain SQL, are the rows Optuna's own storage writes."""

from __future__ import annotations

import math
import warnings

import optuna
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState

from autotune.results.studies import Liveness, LocalTrials
from autotune.results.trial_rows import TrialRows, supported


def _search(storage, heartbeats: Liveness | None = None) -> optuna.Study:
    """The writes of a search: asked trials, parameters (first-time and held back), user and system attributes,
    values (finite and infinite), failed and pruned trials, an enqueued trial, heartbeats."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=storage, study_name="s", sampler=optuna.samplers.RandomSampler(seed=1))
    study.enqueue_trial({"algo": "b"}, user_attrs={"role": "default"})
    for i, (state, value) in enumerate([(None, 1.5), (None, math.inf), (TrialState.FAIL, None),
                                        (TrialState.PRUNED, None), (None, 0.25), (None, -2.0)]):  # fmt: skip
        trial = study.ask()
        if heartbeats is not None:
            heartbeats.beat([trial])
        trial.suggest_categorical("algo", ("a", "b"))
        trial.suggest_int("n", 0, 9)
        trial.suggest_float("x", 0.1, 10.0, log=True)
        trial.storage.set_trial_system_attr(trial._trial_id, "tpe:relative_params:0", '{"n": 3}')
        trial.set_user_attr("outcome", "measured")
        trial.set_user_attr("measurement", {"median_ms": 0.5 + i, "quartiles": [1, 2, 3], "ok": True})
        trial.set_user_attr("outcome", "rejected" if i == 3 else "measured")  # set twice: the last stands
        if heartbeats is not None:
            heartbeats.beat([trial])
        study.tell(trial, value, state=state)
    return study


def _rows(engine: sa.Engine) -> dict:
    """Everything a search wrote, by trial number (ids and times left out; the times are checked to be read)."""
    with engine.connect() as conn:
        number = dict(conn.exec_driver_sql("SELECT trial_id, number FROM trials").all())

        def table(sql: str) -> list:
            return sorted((number[row[0]], *row[1:]) for row in conn.exec_driver_sql(sql).all())

        return {
            "trials": table("SELECT trial_id, state, datetime_start IS NOT NULL, datetime_complete IS NOT NULL "
                            "FROM trials"),
            "params": table("SELECT trial_id, param_name, param_value, distribution_json FROM trial_params"),
            "user": table("SELECT trial_id, key, value_json FROM trial_user_attributes"),
            "system": table("SELECT trial_id, key, value_json FROM trial_system_attributes"),
            "values": table("SELECT trial_id, objective, value, value_type FROM trial_values"),
            "heartbeats": table("SELECT trial_id, heartbeat IS NOT NULL FROM trial_heartbeats"),
        }  # fmt: skip


def test_the_rows_optunas_storage_writes(tmp_path):
    with warnings.catch_warnings():  # heartbeats: experimental, and meant for optimize (autotune beats itself)
        warnings.simplefilter("ignore")
        optunas = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}", heartbeat_interval=5)
        ours_backend = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'ours.db'}", heartbeat_interval=5)
        ours = LocalTrials(ours_backend, refresh_s=60.0)
        assert ours._rows is not None, "the lean writes are what is tested"
        _search(optunas, Liveness(optunas, 5))
        _search(ours, Liveness(ours_backend, 5))
    assert _rows(ours_backend.engine) == _rows(optunas.engine)
    # and Optuna reads them back the same (times as datetimes, in order)
    read = optuna.load_study(study_name="s", storage=ours_backend).trials
    expected = optuna.load_study(study_name="s", storage=optunas).trials
    assert [(t.number, t.state, t.values, t.params, t.user_attrs, t.system_attrs) for t in read] == [
        (t.number, t.state, t.values, t.params, t.user_attrs, t.system_attrs) for t in expected]  # fmt: skip
    for t in read:
        assert t.datetime_start is not None
        assert t.state == TrialState.RUNNING or t.datetime_start <= t.datetime_complete


def test_a_trial_finished_elsewhere_is_refused_and_nothing_is_written(tmp_path):
    backend = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}")
    other = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}")  # another process
    rows = TrialRows(backend)
    study_id = backend.create_new_study([optuna.study.StudyDirection.MINIMIZE], "s")
    trial_id, created = rows.create(study_id)
    number = created.number
    other.set_trial_state_values(trial_id, TrialState.FAIL)  # a stale sweep elsewhere
    dist = optuna.distributions.CategoricalDistribution((1, 2))
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError, match=f"Trial#{number} "):
        rows.write(trial_id, [("A", 0, dist)], {"outcome": "measured"}, state=TrialState.COMPLETE, values=[1.0])
    kept = other.get_trial(trial_id)
    assert kept.state == TrialState.FAIL and kept.params == {} and kept.user_attrs == {} and kept.values is None
    with pytest.raises(KeyError):
        rows.write(trial_id + 100, None, {"a": 1})


def test_trials_created_by_two_processes_are_numbered_in_order(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    one, two = TrialRows(optuna.storages.RDBStorage(url)), TrialRows(optuna.storages.RDBStorage(url))
    study_id = optuna.storages.RDBStorage(url).create_new_study([optuna.study.StudyDirection.MINIMIZE], "s")
    created = [(one if i % 3 else two).create(study_id) for i in range(9)]
    assert [trial.number for _, trial in created] == list(range(9))
    assert [t.number for t in optuna.load_study(study_name="s", storage=url).trials] == list(range(9))


def test_other_databases_keep_optunas_writes(tmp_path):
    assert supported(optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}"))
    assert not supported(optuna.storages.InMemoryStorage())
