"""Proposals repaired to the nearest valid configuration before they become trials.

Kernel spaces are mostly invalid: four in five uniform draws of the fp32 GEMM space break a constraint (a warp
tile that does not split into its threads, registers that would spill). Told as rejected, such a proposal costs a
whole ask and tell and teaches the sampler only where not to go; with TPE about half of a search's proposals were
rejected, and the driver, not nvcc or the GPU, bounded the wall time (issue 12). `RepairingSampler` sits between
Optuna's sampler and the trial: a joint (relative) proposal that breaks a constraint is moved to the nearest valid
configuration of the same algorithm — fewest parameters changed, then the smallest steps along their domains —
and the trial records, and is measured at, what was repaired. Parameters sampled one at a time (a sampler's
random start, a parameter new to the study) are not joint proposals and are rejected as before.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.base import ALGO, Config, KernelSpace

MAX_CHANGED = 2  # parameters a repair may change; beyond that the proposal is rejected as it was


def nearest_valid(space: KernelSpace, config: Config, shape: Shape, device: DeviceInfo) -> Config | None:
    """The valid configuration nearest to ``config`` within its algorithm, or None within `MAX_CHANGED` changes.

    Nearest: fewest parameters changed, then the smallest sum of steps along their domains, then the parameters'
    order (so a repair is deterministic)."""
    params = [p for p in space.active_params(config) if p.name != ALGO and config.get(p.name) in p.values]
    if len(params) != len([p for p in space.active_params(config) if p.name != ALGO]):
        return None  # a value outside the domain: not a proposal of this space
    moves = []  # per parameter: (steps, parameter name, value) for every other value of its domain
    for p in params:
        here = p.values.index(config[p.name])
        moves.append([(abs(i - here), p.name, v) for i, v in enumerate(p.values) if i != here])
    for changed in range(1, MAX_CHANGED + 1):
        candidates = []
        for group in itertools.combinations(range(len(moves)), changed):
            for picks in itertools.product(*(moves[i] for i in group)):
                candidates.append((sum(step for step, _, _ in picks), group, picks))
        candidates.sort(key=lambda c: (c[0], c[1]))
        for _, _, picks in candidates:
            repaired = {**config, **{name: value for _, name, value in picks}}
            if not space.violations(repaired, shape, device):
                return repaired
    return None


class RepairingSampler(BaseSampler):
    """``base``'s proposals, each joint proposal repaired to the nearest valid configuration (`nearest_valid`)."""

    def __init__(self, base: BaseSampler, space: KernelSpace, shape: Shape, device: DeviceInfo) -> None:
        self.base = base
        self.space = space
        self.shape = tuple(shape)
        self.device = device
        self.repaired = 0  # proposals moved to a valid configuration

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        params = self.base.sample_relative(study, trial, search_space)
        return self.repair(params)

    def repair(self, params: dict[str, Any]) -> dict[str, Any]:
        """The proposed Optuna parameters, moved to a valid configuration where they form a whole invalid one."""
        if self.space.algorithms and ALGO not in params:
            return params
        config = self.space.config_of(params)
        active = self.space.active_params(config)
        if any(p.key not in params for p in active) or not self.space.violations(config, self.shape, self.device):
            return params
        repaired = nearest_valid(self.space, config, self.shape, self.device)
        if repaired is None:
            return params
        self.repaired += 1
        return {**params, **self.space.optuna_params(repaired)}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()
