"""autotune.tuning.tpe.CachingTPESampler proposes exactly what Optuna's TPESampler proposes."""

from __future__ import annotations

import random
import warnings

import optuna
import pytest
from optuna.search_space.group_decomposed import _GroupDecomposedSearchSpace
from optuna.trial import TrialState

from autotune.tuning.tpe import CachingTPESampler, IncrementalGroups

ALGOS = {"a": {"BM": (16, 32, 64, 128), "BN": (16, 32, 64), "K": (1, 2)}, "b": {"T": (1, 2, 4, 8), "S": (0, 1)},
         "c": {"X": (3, 5, 7)}}  # fmt: skip


def _drive(sampler: optuna.samplers.BaseSampler, seed: int, direction: str = "minimize", storage=None) -> list:
    """A define-by-run search like autotune's (an algorithm, then its own parameters), with several trials in
    flight (the constant liar's running trials), told out of order, some pruned and some failed; returns every
    trial's parameters and state."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=sampler, direction=direction, storage=storage)
    rng = random.Random(seed)
    in_flight: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        for _ in range(90):
            trial = study.ask()
            algo = trial.suggest_categorical("algo", tuple(ALGOS))
            for name, values in ALGOS[algo].items():
                trial.suggest_categorical(f"{algo}.{name}", values)
            in_flight.append(trial)
            while len(in_flight) > rng.choice((0, 2, 5)):
                told = in_flight.pop(rng.randrange(len(in_flight)))
                roll = rng.random()
                if roll < 0.15:
                    study.tell(told, state=TrialState.PRUNED)
                elif roll < 0.2:
                    study.tell(told, state=TrialState.FAIL)
                else:
                    study.tell(told, sum(hash(str(v)) % 97 for v in told.params.values()) / 97.0)
    return [(t.number, t.state.name, t.params) for t in study.trials]


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("options", [dict(multivariate=True, group=True, constant_liar=True),
                                     dict(multivariate=True, group=True, constant_liar=False),
                                     dict(multivariate=True, constant_liar=True)])  # fmt: skip
def test_the_same_proposals_as_optunas_tpe(seed, options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optunas = optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, **options)
    ours = CachingTPESampler(seed=seed, n_startup_trials=8, **options)
    assert _drive(ours, seed) == _drive(optunas, seed)


def test_the_same_proposals_through_the_search_storage(tmp_path):
    """As a search runs it: on SQLite through `LocalTrials` (its cached listings, its own writes)."""
    from autotune.results.studies import LocalTrials

    storage = LocalTrials(optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}"), refresh_s=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optunas = optuna.samplers.TPESampler(seed=2, n_startup_trials=8, multivariate=True, group=True,
                                             constant_liar=True)  # fmt: skip
    ours = CachingTPESampler(seed=2, n_startup_trials=8, multivariate=True, group=True, constant_liar=True)
    assert _drive(ours, 2, storage=storage) == _drive(optunas, 2)


def test_the_same_proposals_when_maximising():  # Optuna's own sampling, unchanged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optunas = optuna.samplers.TPESampler(seed=3, multivariate=True, group=True, constant_liar=True)
    ours = CachingTPESampler(seed=3, multivariate=True, group=True, constant_liar=True)
    assert _drive(ours, 3, "maximize") == _drive(optunas, 3, "maximize")


def test_incremental_groups_are_optunas_groups():
    """Fed the study's trials as they finish, call after call, the groups are those Optuna computes from all the
    trials at every call."""
    rng = random.Random(5)
    names = [f"p{i}" for i in range(12)]
    study = optuna.create_study()
    ours, optunas = IncrementalGroups(include_pruned=True), _GroupDecomposedSearchSpace(include_pruned=True)
    for _ in range(60):
        chosen = rng.sample(names, rng.randint(1, 6))
        distributions = {n: optuna.distributions.CategoricalDistribution((0, 1, 2)) for n in chosen}
        state = rng.choice((TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL))
        value = 1.0 if state == TrialState.COMPLETE else None
        study.add_trial(optuna.trial.create_trial(params={n: 0 for n in chosen}, distributions=distributions,
                                                  state=state, value=value))  # fmt: skip
        expected = [sorted(space) for space in optunas.calculate(study).search_spaces]
        assert [sorted(space) for space in ours.calculate(study).search_spaces] == expected


def _owner(keys, params):
    """The group filter of the `_drive` space (as `autotune.spaces.optuna_mapping.group_used` for a real one)."""
    owners = {key.split(".")[0] for key in keys if "." in key}
    if not owners:
        return True
    return None if "algo" not in params else params["algo"] in owners


def test_a_group_filter_samples_only_the_groups_a_proposal_uses(monkeypatch):
    """With a group filter, each proposal after the start-up samples the algorithm's group, then that
    algorithm's parameters alone, and shares only those as its constant lie; the trials are as valid."""
    sampled: list[tuple[int, frozenset]] = []
    shared: dict[int, set] = {}
    ours = CachingTPESampler(seed=3, n_startup_trials=8, multivariate=True, group=True, constant_liar=True)
    ours.group_filter = _owner
    original = CachingTPESampler._sample

    def logged(self, study, trial, search_space):
        sampled.append((trial.number, frozenset(search_space)))
        out = original(self, study, trial, search_space)
        return out

    monkeypatch.setattr(CachingTPESampler, "_sample", logged)
    original_share = CachingTPESampler._sample_used_groups

    def sharing(self, study, trial, search_space, used):
        params = original_share(self, study, trial, search_space, used)
        shared[trial.number] = set(params)
        return params

    monkeypatch.setattr(CachingTPESampler, "_sample_used_groups", sharing)
    trials = _drive(ours, 3)
    assert len(trials) == 90 and len(sampled) > 80
    by_trial: dict[int, list[frozenset]] = {}
    for number, space in sampled:
        by_trial.setdefault(number, []).append(space)
    for number, spaces in by_trial.items():
        algo = next(params["algo"] for n, _, params in trials if n == number)
        assert spaces[0] == {"algo"}, spaces  # the choice first, then only the chosen algorithm's group
        assert all(key.startswith(f"{algo}.") for space in spaces[1:] for key in space), (algo, spaces)
        assert shared[number] <= {"algo"} | {f"{algo}.{name}" for name in ALGOS[algo]}
