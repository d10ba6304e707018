"""Every configuration of a space: how many there are, all of them in a fixed order, uniform draws, the valid ones.

A family's configurations hold ``ALGO`` and the parameters of that algorithm only, so the product of the domains
is taken algorithm by algorithm (`groups`), never across the parameters of two algorithms.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.base import ALGO, Config, KernelSpace, Param


def groups(space: KernelSpace) -> list[list[Param]]:
    """The parameter lists of the configurations: one per algorithm (a family), or all of them."""
    if not space.algorithms:
        return [list(space.params)]
    algo_values = space.params[0].values
    shared = [p for p in space.params[1:] if p.algorithm is None]
    return [[Param(ALGO, (a,)), *shared, *(p for p in space.params if p.algorithm == a)] for a in algo_values]


def size(space: KernelSpace) -> int:
    """Number of configurations in the product of the domains (valid or not)."""
    return sum(math.prod(len(p.values) for p in group) for group in groups(space))


def configs(space: KernelSpace) -> Iterator[Config]:
    """Every configuration of the product of the domains, in a fixed order (algorithm by algorithm)."""
    for group in groups(space):
        names = [p.name for p in group]
        for values in np.ndindex(*(len(p.values) for p in group)):
            yield {n: p.values[i] for n, p, i in zip(names, group, values)}


def random_config(space: KernelSpace, rng: Any) -> Config:
    """A configuration drawn uniformly per parameter (``ALGO`` first, then its parameters); ``rng`` is a
    `random.Random` or a numpy Generator."""
    config: Config = {}
    for p in space.params:
        if p.algorithm is None or p.algorithm == config.get(ALGO):
            i = int(rng.integers(len(p.values))) if hasattr(rng, "integers") else rng.randrange(len(p.values))
            config[p.name] = p.values[i]
    return config


def valid_configs(space: KernelSpace, shape: Shape, device: DeviceInfo) -> list[Config]:
    """The configurations of `configs` that pass the space's constraints at ``shape`` on ``device``."""
    return [c for c in configs(space) if not space.violations(c, shape, device)]
