"""Optuna's multivariate TPE with the same proposals at a cost that grows less with the study.

Each proposal of Optuna's grouped, multivariate TPE re-reads every finished trial twice over: it decomposes the
study's search space into groups again from all trials (issue 12: 4 ms of a 30 ms proposal at 1000 trials), and
for every group it converts each trial's parameters to their internal representation again, for the trials
above and below the split (3 ms more). Both are pure functions of finished trials, which never change, so
`CachingTPESampler` remembers them; everything that samples, and so every random draw, is Optuna's own. The same
seed and the same results in the same order give the same proposals (`tests/test_tpe.py` checks it against
Optuna's sampler).

Private API, unavoidably: Optuna's TPE exposes no hook for either. This module replaces the sampler's
``_group_decomposed_search_space`` (a ``_GroupDecomposedSearchSpace`` whose ``calculate`` adds only trials it has not
seen) and overrides ``TPESampler._get_internal_repr``; ``tests/test_studies.py`` pins the Optuna version they were
checked against.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.search_space.group_decomposed import _GroupDecomposedSearchSpace, _SearchSpaceGroup
from optuna.trial import FrozenTrial, TrialState

_MISSING = object()


class IncrementalGroups(_GroupDecomposedSearchSpace):
    """Optuna's group decomposition, fed each trial once.

    Optuna adds every finished trial's distributions to the groups at each call; adding a set of parameters
    the groups have seen already changes nothing (every group is then inside it or apart from it), so adding
    only the trials not seen before, in the same order, gives the same groups."""

    def __init__(self, include_pruned: bool = False) -> None:
        super().__init__(include_pruned)
        self._seen_numbers: set[int] = set()  # finished trials added (their parameters never change)
        self._seen_keys: set[frozenset[str]] = set()  # parameter sets added

    def calculate(self, study: optuna.Study, use_cache: bool = False) -> _SearchSpaceGroup:
        if self._study_id is None:
            self._study_id = study._study_id
        elif self._study_id != study._study_id:
            raise ValueError("`_GroupDecomposedSearchSpace` cannot handle multiple studies.")
        states = (TrialState.COMPLETE, TrialState.PRUNED) if self._include_pruned else (TrialState.COMPLETE,)
        for trial in study._get_trials(deepcopy=False, states=states, use_cache=use_cache):
            if trial.number in self._seen_numbers:
                continue
            self._seen_numbers.add(trial.number)
            keys = frozenset(trial.distributions)
            if keys not in self._seen_keys:
                self._seen_keys.add(keys)
                self._search_space.add_distributions(trial.distributions)
        # A copy, as Optuna returns (the distributions themselves are never changed by the sampler).
        copied = _SearchSpaceGroup()
        copied._search_spaces = [dict(space) for space in self._search_space.search_spaces]
        return copied


class CachingTPESampler(optuna.samplers.TPESampler):
    """`optuna.samplers.TPESampler` that remembers what it derives from finished trials (see the module)."""

    def __init__(self, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            super().__init__(**kwargs)
        if self._group_decomposed_search_space is not None:
            self._group_decomposed_search_space = IncrementalGroups(include_pruned=True)
        # (group's parameters and distributions) → trial number → the finished trial's internal values (None: the
        # trial lacks one of the parameters)
        self._internal: dict[tuple[tuple[str, BaseDistribution], ...], dict[int, tuple | None]] = {}

    def _get_internal_repr(
        self, trials: list[FrozenTrial], search_space: dict[str, BaseDistribution], study: optuna.Study
    ) -> dict[str, np.ndarray]:
        memo = self._internal.setdefault(tuple(search_space.items()), {})
        rows = []
        for trial in trials:
            row = memo.get(trial.number, _MISSING) if trial.state.is_finished() else _MISSING
            if row is _MISSING:
                row = self._internal_row(trial, search_space, study)
                if trial.state.is_finished():
                    memo[trial.number] = row
            if row is not None:
                rows.append(row)
        # Column by column from Python values, as Optuna builds them (same dtypes: int for a categorical index).
        return {name: np.asarray([row[i] for row in rows]) for i, name in enumerate(search_space)}

    def _internal_row(
        self, trial: FrozenTrial, search_space: dict[str, BaseDistribution], study: optuna.Study
    ) -> tuple | None:
        params = self._get_params(trial, study)
        if not search_space.keys() <= params.keys():
            return None
        return tuple(distribution.to_internal_repr(params[name]) for name, distribution in search_space.items())
