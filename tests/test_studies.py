"""autotune.results.studies.LocalTrials: the search's cached view of the study, and the parameters it holds back."""

from __future__ import annotations

import optuna
import pytest
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
