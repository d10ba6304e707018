"""autotune.results.studies.LocalTrials: the search's cached view of the study, and the parameters it holds back."""

from __future__ import annotations

import optuna
import pytest
import sqlalchemy
from optuna.trial import TrialState

from autotune.results.studies import LocalTrials


def _storages(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    return LocalTrials(optuna.storages.RDBStorage(url), refresh_s=60.0), optuna.storages.RDBStorage(url)


def test_parameters_reach_the_database_before_the_trials_state(tmp_path):
    local, other = _storages(tmp_path)
    study = optuna.create_study(storage=local, study_name="s")
    first = study.ask()
    first.suggest_categorical("A", (1, 2))
    study.tell(first, 1.0)
    trial = study.ask()
    a = trial.suggest_categorical("A", (1, 2))  # known distribution: held back
    b = trial.suggest_int("B", 0, 9)  # first time: written at once
    seen = other.get_trial(trial._trial_id)
    assert "A" not in seen.params and seen.params["B"] == b
    trial.set_user_attr("note", "x")  # held back as well
    assert "note" not in other.get_trial(trial._trial_id).user_attrs
    assert study.trials[-1].user_attrs["note"] == "x" and study.trials[-1].params == {"A": a, "B": b}  # cached
    study.tell(trial, 3.0)  # the state goes in only after the held-back parameters and attributes
    written = other.get_trial(trial._trial_id)
    assert written.params == {"A": a, "B": b} and written.user_attrs == {"note": "x"} and written.value == 3.0
    third = study.ask()
    third.suggest_categorical("A", (1, 2))
    study.tell(third, 2.0)
    assert other.get_trial(third._trial_id).params.keys() == {"A"}
    assert other.get_trial(third._trial_id).state == TrialState.COMPLETE


def test_own_running_trials_are_read_from_the_cache_and_a_refresh_writes_what_was_held_back(tmp_path):
    local, other = _storages(tmp_path)
    study = optuna.create_study(storage=local, study_name="s")
    study.tell(study.ask({"A": optuna.distributions.CategoricalDistribution((1, 2))}), 1.0)
    trial = study.ask()
    trial.suggest_categorical("A", (1, 2))
    trial.set_user_attr("k", 1)
    read = local.get_trial(trial._trial_id)  # Optuna's tell reads twice: this process's own trial, from the cache
    assert read.user_attrs == {"k": 1} and "A" in read.params
    assert other.get_trial(trial._trial_id).user_attrs == {}, "nothing written by a read"
    read.user_attrs["k"] = 2
    assert local.get_trial(trial._trial_id).user_attrs == {"k": 1}, "a copy: the cache is not changed through it"
    late = study.ask()
    late.suggest_categorical("A", (1, 2))
    local.write_pending()
    assert "A" in other.get_trial(late._trial_id).params
    with pytest.raises(TypeError):
        late.set_user_attr("bad", object())  # not JSON: refused when set, not at the next write


def test_listings_follow_the_cache(tmp_path):
    """`LocalTrials.get_all_trials` keeps a listing until the cache changes: a state set, a trial added, or
    another process's trial read by a refresh; each caller gets a list of its own."""
    local, other = _storages(tmp_path)
    study = optuna.create_study(storage=local, study_name="s")
    first = study.ask()
    assert [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))] == [0]
    study.tell(first, 1.0)
    assert study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)) == []
    assert [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))] == [0]
    study.get_trials(deepcopy=False).append("the caller's own")
    study.ask()
    assert [t.number for t in study.get_trials(deepcopy=False)] == [0, 1]
    elsewhere = optuna.load_study(study_name="s", storage=other)
    elsewhere.tell(elsewhere.ask(), 2.0)  # another process's trial, read at the next refresh
    local.refresh_s = 0.0
    listed = study.get_trials(deepcopy=False)
    assert [(t.number, t.state) for t in listed] == [(0, TrialState.COMPLETE), (1, TrialState.RUNNING),
                                                     (2, TrialState.COMPLETE)]  # fmt: skip


def test_an_incompatible_distribution_is_refused_at_once(tmp_path):
    local, _ = _storages(tmp_path)
    study = optuna.create_study(storage=local, study_name="s")
    study.ask().suggest_categorical("A", (1, 2))
    with pytest.raises(ValueError):
        study.ask().suggest_categorical("A", (3, 4))


def test_a_trial_settled_by_another_process_is_refused_and_then_read_from_the_database(tmp_path):
    local, other = _storages(tmp_path)
    study = optuna.create_study(storage=local, study_name="s")
    trial = study.ask()
    trial.suggest_categorical("A", (1, 2))
    other.set_trial_state_values(trial._trial_id, TrialState.FAIL)  # a stale sweep elsewhere
    assert local.get_trial(trial._trial_id).state == TrialState.RUNNING, "the cache does not know yet"
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        study.tell(trial, 1.0)
    assert local.get_trial(trial._trial_id).state == TrialState.FAIL


def test_heartbeats_find_the_trial_by_public_api(tmp_path):
    """`studies.trial_id` (Optuna's public storage API) names the trial `optuna.Trial` keeps privately: heartbeats
    land on it, through the cache as through the database."""
    from autotune.results.studies import Liveness, trial_id

    url = f"sqlite:///{tmp_path / 'h.db'}"
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        backend = optuna.storages.RDBStorage(url, heartbeat_interval=1)
    for storage in (LocalTrials(backend, refresh_s=60.0), backend):
        study = optuna.create_study(storage=storage, study_name=f"h{len(storage.get_all_studies())}")
        with pytest.warns(UserWarning, match="Heartbeat of storage"):
            trials = [study.ask() for _ in range(3)]
        assert [trial_id(t) for t in trials] == [t._trial_id for t in trials]  # the private id, for this check only
        Liveness(backend, heartbeat_s=1).beat(trials[1:])
        with backend.engine.connect() as conn:
            rows = conn.execute(sqlalchemy.text("SELECT trial_id FROM trial_heartbeats")).fetchall()
        assert {t._trial_id for t in trials[1:]} <= {r[0] for r in rows}
        assert trials[0]._trial_id not in {r[0] for r in rows}


def test_a_result_for_a_trial_another_process_failed_is_dropped(tmp_path):
    """`TrialWriter.tell_measured` where a stale sweep elsewhere failed the trial meanwhile: the database refuses the
    result, `settled_elsewhere` finds the trial finished (by Optuna's public storage API), and the result is
    dropped (None) instead of raising."""
    from autotune.results.studies import trial_id
    from autotune.tuning.claims import Unshared
    from autotune.tuning.evaluation.base import Measurement
    from autotune.tuning.trial_writer import TrialWriter

    local, other = _storages(tmp_path)
    study = optuna.create_study(storage=local, study_name="s")
    trial, kept = study.ask(), study.ask()
    other.set_trial_state_values(trial_id(trial), TrialState.FAIL)  # a stale sweep elsewhere
    writer = TrialWriter(study, Unshared(), ledger=None, sampler="random")
    measured = Measurement.failed("wrong", "synthetic")
    assert writer.tell_measured(trial, measured, {"outcome": "measured"}) is None
    assert writer.settled_elsewhere(trial) and not writer.settled_elsewhere(kept)
    assert writer.tell_measured(kept, measured, {"outcome": "measured"}).state == TrialState.FAIL


def test_the_optuna_version_the_private_api_was_checked_against():
    """autotune uses Optuna's private API in three places, each because no public API does it. It was written and
    checked against Optuna 5.0. On another version, re-check before changing the pin:

    * `autotune.results.studies.LocalTrials` (no public API caches a storage's trials or batches its writes):
      ``optuna.storages._cached_storage._CachedStorage`` (its ``_lock``, ``_studies``, ``_StudyInfo``,
      ``_trial_id_to_study_id_and_number``, ``_add_trials_to_cache``, ``_read_trials_from_remote_storage``, and how
      its ``get_trial`` / ``get_all_trials`` / ``set_trial_*`` / ``create_new_trial`` behave), and for its held-back
      writes (`autotune.results.held_writes`) ``optuna.storages._rdb.storage._create_scoped_session``,
      ``optuna.storages._rdb.models`` (TrialModel.find_or_raise_by_id, TrialParamModel, TrialUserAttributeModel)
      and ``RDBStorage._set_trial_attr_without_commit``;
    * `autotune.results.trial_rows` (writes Optuna's tables as SQL): the tables and columns of
      ``optuna.storages._rdb.models``, how their enums and datetimes are stored, ``TrialValueModel.
      value_to_stored_repr``, ``NOT_FOUND_MSG``, and what ``RDBStorage`` checks before it writes; then
      tests/test_trial_rows.py;
    * `autotune.tuning.tpe` (TPE that remembers what it derives from finished trials): ``TPESampler._sample``,
      ``_get_internal_repr``, ``_get_params``, ``_group_decomposed_search_space``, ``_split_trials`` and the
      helpers it calls, ``_RELATIVE_PARAMS_KEY``, and ``optuna.search_space.group_decomposed``; then
      tests/test_tpe.py;

    then run tests/test_studies.py."""
    tested = (5, 0)
    major_minor = tuple(int(part) for part in optuna.__version__.split(".")[:2])
    assert major_minor == tested, (
        f"Optuna {optuna.__version__} is installed; autotune's private-API use (LocalTrials, trial_rows, tpe) was "
        f"checked against "
        f"{tested[0]}.{tested[1]}: re-check what this test's docstring lists, then update `tested`"
    )
