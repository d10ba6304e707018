"""A space's configurations as the parameters of Optuna trials, and back.

In Optuna a parameter is named by its `Param.key` (``<algorithm>.<name>`` for an algorithm's own parameters, since
two algorithms may both have a ``BM``); a configuration names it by `Param.name`. A family's trials are sampled
define-by-run: ``ALGO`` first, then the parameters of the algorithm it picked.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from autotune.spaces.base import ALGO, Config, KernelSpace


def suggest(space: KernelSpace, trial: Any) -> Config:
    """Sample a configuration from an Optuna trial, define-by-run: ``ALGO`` first, then its parameters."""
    config: Config = {}
    for p in space.params:
        if p.algorithm is None or p.algorithm == config.get(ALGO):
            config[p.name] = trial.suggest_categorical(p.key, list(p.values))
    return config


def optuna_params(space: KernelSpace, config: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration as Optuna parameters (for `optuna.Study.enqueue_trial`)."""
    return {p.key: config[p.name] for p in space.active_params(config) if p.name in config}


def config_of(space: KernelSpace, params: Mapping[str, Any]) -> Config:
    """The configuration of an Optuna trial's parameters (the inverse of `optuna_params`)."""
    config: Config = {}
    algo = params.get(ALGO)
    for p in space.params:
        if p.key in params and (p.algorithm is None or p.algorithm == algo):
            config[p.name] = params[p.key]
    return config


def group_used(space: KernelSpace, keys: Sequence[str], params: Mapping[str, Any]) -> bool | None:
    """Whether a trial whose parameters so far are ``params`` can use the parameters ``keys`` (a group of
    Optuna's multivariate TPE): those of no algorithm always, an algorithm's only once ``ALGO`` names it; None
    while ``ALGO`` is not known."""
    algorithms = {p.key: p.algorithm for p in space.params}
    owners = {algorithms.get(key) for key in keys}
    if owners <= {None}:
        return True
    if ALGO not in params:
        return None
    return params[ALGO] in owners
