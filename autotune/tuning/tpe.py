"""Optuna's multivariate TPE with the same proposals at a cost that grows less with the study.

Each proposal of Optuna's grouped, multivariate TPE re-reads every trial several times over: it decomposes the
study's search space into groups again from all trials (issue 12: 4 ms of a 30 ms proposal at 1000 trials), and
for every group it splits the trials into the better and the rest again and converts each trial's parameters
to their internal representation again (6 ms more), parsing again the relative parameters that each running
trial shares (the constant liar). All of these are pure functions of finished trials, which never change (and
of the JSON a running trial shares), so `CachingTPESampler` remembers them; everything that samples, and so
every random draw, is Optuna's own. The same seed and the same results in the same order give the same
proposals (`tests/test_tpe.py` checks it against Optuna's sampler, and a replayed search's whole trial sequence
was compared before and after).

A proposal of a define-by-run space uses one algorithm's group of parameters, but Optuna samples every group for
it (four for fp32 gemm: ``ALGO`` and three algorithms') and drops the unused ones. Given a `group_filter` (the
`autotune.tuning.proposals.RepairingSampler` sets one from the space), `CachingTPESampler.sample_relative` samples
only the groups the proposal can use, and shares only those as its constant lie: the same distribution of
proposals at about half the cost (issue 24: the driver was what four GPUs waited on), though no longer the same
random draws as Optuna's (without a filter they are).

Private API, unavoidably: Optuna's TPE exposes no hook for any of this. This module replaces the sampler's
``_group_decomposed_search_space`` (with a ``_GroupDecomposedSearchSpace`` whose ``calculate`` adds only trials it
has not seen) and overrides ``TPESampler._sample`` (Optuna's, with its ``_split_trials`` done by `_split`),
``_get_internal_repr`` and ``_get_params``; ``tests/test_studies.py`` pins the Optuna version they were checked
against.
"""

from __future__ import annotations

import json
import operator
import warnings
from typing import Any, Callable, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers._tpe.sampler import (
    _RELATIVE_PARAMS_KEY,
    _SYSTEM_ATTR_MAX_LENGTH,
    _get_infeasible_trial_score,
    _get_pruned_trial_score,
    default_gamma,
)
from optuna.search_space.group_decomposed import _GroupDecomposedSearchSpace, _SearchSpaceGroup
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

_MISSING = object()


_first = operator.itemgetter(0)


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
        # finished trial number → (0 complete, 1 pruned, 2 infeasible; its sort key within those): how
        # `_split_trials` ranks it
        self._ranks: dict[int, tuple[int, Any]] = {}
        self._proposing: int | None = None  # the trial whose relative parameters are being sampled
        self._last_split: tuple | None = None  # (trial number, trials read, below, above) of this proposal
        # running trial number → the relative parameters it shares, as JSON and parsed
        self._shared: dict[int, tuple[str, dict]] = {}
        # (a group's parameter names, the parameters sampled so far for this proposal) → whether the proposal can
        # use the group; None: not known yet (the choice it depends on is in a group not sampled yet)
        self.group_filter: Callable[[Sequence[str], dict[str, Any]], bool | None] | None = None

    def _sample(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        """Optuna 5.0's ``TPESampler._sample`` with its ``_split_trials`` replaced by `_split` (the same split, each
        finished trial ranked once); a multi-objective or maximised study is left to Optuna's own."""
        if len(study.directions) > 1 or study.direction != StudyDirection.MINIMIZE:
            return super()._sample(study, trial, search_space)
        if self._constant_liar:
            states = [TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING]
        else:
            states = [TrialState.COMPLETE, TrialState.PRUNED]
        trials = study._get_trials(deepcopy=False, states=states, use_cache=not self._constant_liar)
        below_trials, above_trials = self._split_once(study, trial, trials)
        mpe_below = self._build_parzen_estimator(study, search_space, below_trials, handle_below=True)
        mpe_above = self._build_parzen_estimator(study, search_space, above_trials, handle_below=False)
        samples_below = mpe_below.sample(self._rng.rng, self._n_ei_candidates)
        acq_func_vals = self._compute_acquisition_func(samples_below, mpe_below, mpe_above)
        ret = optuna.samplers.TPESampler._compare(samples_below, acq_func_vals)
        for param_name, dist in search_space.items():
            ret[param_name] = dist.to_external_repr(ret[param_name])
        return ret

    def _split_once(
        self, study: optuna.Study, trial: FrozenTrial, trials: list[FrozenTrial]
    ) -> tuple[list[FrozenTrial], list[FrozenTrial]]:
        """Optuna's split of ``trials`` for sampling ``trial``, made once per proposal: within one `sample_relative`
        every group reads the same trials (the same objects, their states unchanged: nothing is told while a
        proposal is sampled), and splits them the same way. Trials read again meanwhile (another process's, by a
        refresh) are other objects, and are split anew."""
        last = self._last_split
        if (last is not None and last[0] == trial.number and len(last[1]) == len(trials)
                and all(map(operator.is_, last[1], trials))):  # fmt: skip
            return last[2], last[3]
        read = trials
        if self._constant_liar:  # the trial being sampled is not a lie about itself
            trials = [t for t in trials if trial.number != t.number]
        if self._gamma is None:
            self._gamma = default_gamma
        n = sum(t.state != TrialState.RUNNING for t in trials)
        below, above = self._split(study, trials, self._gamma(n))
        if self._proposing == trial.number:
            self._last_split = (trial.number, read, below, above)
        return below, above

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        self._proposing, self._last_split = trial.number, None  # a split is reused within this proposal only
        try:
            if self.group_filter is None or not self._group or self._search_space_group is None:
                return super().sample_relative(study, trial, search_space)
            return self._sample_used_groups(study, trial, search_space, self.group_filter)
        finally:
            self._proposing, self._last_split = None, None

    def _sample_used_groups(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution],
                            used: Callable[[Sequence[str], dict[str, Any]], bool | None]) -> dict[str, Any]:  # fmt: skip
        """Optuna 5.0's grouped ``sample_relative``, sampling only the groups ``used`` says the proposal can use
        (in Optuna's order; a group that depends on a choice not made yet waits for it)."""
        assert self._search_space_group is not None
        pending = []
        for sub_space in self._search_space_group.search_spaces:
            group = {name: d for name, d in sorted(sub_space.items()) if not d.single() and name in search_space}
            if group:
                pending.append(group)
        params: dict[str, Any] = {}
        while pending:
            waiting = []
            for group in pending:
                use = used(list(group), params)
                if use is None:
                    waiting.append(group)
                elif use:
                    params.update(self._sample_relative(study, trial, group))
            if len(waiting) == len(pending):  # nothing sampled decides them (e.g. ALGO sampled on its own)
                for group in waiting:
                    params.update(self._sample_relative(study, trial, group))
                break
            pending = waiting
        if params and self._constant_liar:  # Optuna's sharing of the lie, with the groups sampled
            text = json.dumps(params)
            for i in range(0, len(text), _SYSTEM_ATTR_MAX_LENGTH):
                study._storage.set_trial_system_attr(trial._trial_id, f"{_RELATIVE_PARAMS_KEY}:{i // _SYSTEM_ATTR_MAX_LENGTH}",
                                                     text[i : i + _SYSTEM_ATTR_MAX_LENGTH])  # fmt: skip
        return params

    def _split(
        self, study: optuna.Study, trials: list[FrozenTrial], n_below: int
    ) -> tuple[list[FrozenTrial], list[FrozenTrial]]:
        """Optuna 5.0's ``_split_trials`` for a single objective to minimise: the ``n_below`` best complete trials,
        then the best pruned, then the least infeasible, below; the rest and the running ones above; each side in
        trial order. Python's sorts are stable, as Optuna's, so ties fall the same way."""
        numbers = [t.number for t in trials]
        groups: tuple[list, list, list] = ([], [], [])  # complete, pruned, infeasible: (key, index in trials)
        running = []
        for i, t in enumerate(trials):
            if t.state == TrialState.RUNNING:
                running.append(i)
                continue
            rank = self._ranks.get(numbers[i])
            if rank is None:  # finished: its rank never changes
                rank = self._ranks[numbers[i]] = self._rank(t, study)
            groups[rank[0]].append((rank[1], i))
        below: list[int] = []
        above: list[int] = []
        for group in groups:
            ranked = [i for _, i in sorted(group, key=_first)]  # by key alone: stable, as Optuna's sort
            n = max(0, min(n_below, len(ranked)))
            below += ranked[:n]
            above += ranked[n:]
            n_below = max(0, n_below - n)
        above += running
        by_number = numbers.__getitem__
        return [trials[i] for i in sorted(below, key=by_number)], [trials[i] for i in sorted(above, key=by_number)]

    @staticmethod
    def _rank(trial: FrozenTrial, study: optuna.Study) -> tuple[int, Any]:
        infeasible = _get_infeasible_trial_score(trial)
        if infeasible > 0:
            return 2, infeasible
        if trial.state == TrialState.COMPLETE:
            return 0, trial.value
        assert trial.state == TrialState.PRUNED
        return 1, _get_pruned_trial_score(trial, study)

    def _get_internal_repr(
        self, trials: list[FrozenTrial], search_space: dict[str, BaseDistribution], study: optuna.Study
    ) -> dict[str, np.ndarray]:
        memo = self._internal.setdefault(tuple(search_space.items()), {})
        rows = [memo.get(trial.number, _MISSING) for trial in trials]  # only finished trials are remembered
        if _MISSING in rows:
            for i, trial in enumerate(trials):
                if rows[i] is _MISSING:
                    rows[i] = self._internal_row(trial, search_space, study)
                    if trial.state.is_finished():
                        memo[trial.number] = rows[i]
        rows = [row for row in rows if row is not None]
        # Column by column from Python values, as Optuna builds them (same dtypes: int for a categorical index).
        columns = list(zip(*rows)) if rows else [[] for _ in search_space]
        return {name: np.asarray(list(column)) for name, column in zip(search_space, columns)}

    def _get_params(self, trial: FrozenTrial, study: optuna.Study) -> dict[str, Any]:
        """Optuna 5.0's: a finished trial's parameters; a running one's with the relative parameters its sampler
        shared (the constant liar), each shared string parsed once."""
        if trial.state.is_finished() or not self._is_multivariate(study):
            return trial.params
        chunks = []
        while chunk := trial.system_attrs.get(f"{_RELATIVE_PARAMS_KEY}:{len(chunks)}"):
            chunks.append(chunk)
        if not chunks:
            return trial.params
        shared = "".join(chunks)
        known = self._shared.get(trial.number)
        if known is None or known[0] != shared:
            try:
                known = self._shared[trial.number] = (shared, json.loads(shared))
            except json.JSONDecodeError:  # written by several processes at once (Optuna's fallback)
                return trial.params
        return {**known[1], **trial.params}

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self._shared.pop(trial.number, None)  # finished: its own parameters are read from now on
        super().after_trial(study, trial, state, values)

    def _internal_row(
        self, trial: FrozenTrial, search_space: dict[str, BaseDistribution], study: optuna.Study
    ) -> tuple | None:
        params = self._get_params(trial, study)
        if not search_space.keys() <= params.keys():
            return None
        return tuple(distribution.to_internal_repr(params[name]) for name, distribution in search_space.items())
