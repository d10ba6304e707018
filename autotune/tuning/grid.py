"""``--sampler grid``: every valid configuration in turn, each enqueued as the study's next trial.

Optuna's GridSampler would walk the whole product of the domains, mostly invalid for kernel spaces; the search
enqueues the valid, unmeasured configurations instead, in `autotune.spaces.enumeration.configs` order, and the
sampler (a random one) stands by.
"""

from __future__ import annotations

from typing import Callable, Iterator

import optuna
from optuna.trial import TrialState

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace
from autotune.spaces.optuna_mapping import optuna_params


class GridWalk:
    """The valid configurations of a search's space in turn (see the module)."""

    def __init__(self, order: Iterator[Config], space: KernelSpace, shape: Shape, device: DeviceInfo,
                 taken: Callable[[Config], bool]) -> None:  # fmt: skip
        """``order``: the configurations in turn; ``taken``: whether one is measured or in flight already."""
        self._order = order
        self.space = space
        self.shape = shape
        self.device = device
        self._taken = taken

    def enqueue_next(self, study: optuna.Study) -> bool:
        """Enqueue the next configuration, unless enqueued trials (default, seeds) are still to be asked for
        first; False once every valid configuration has been measured."""
        if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return True
        config = self._next()
        if config is None:
            return False
        study.enqueue_trial(optuna_params(self.space, config))
        return True

    def _next(self) -> Config | None:
        for config in self._order:
            if not self._taken(config) and not self.space.violations(config, self.shape, self.device):
                return config
        return None
