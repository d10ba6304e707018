"""Search strategies: Optuna's samplers by name.

``grid`` is exhaustive: the driver enqueues every valid configuration in turn (Optuna's GridSampler would walk
the whole product of the domains, mostly invalid for kernel spaces), and a random sampler stands by.
"""

from __future__ import annotations

import importlib.util

import optuna

from autotune.errors import InvalidArgument
from autotune.tuning.tpe import CachingTPESampler

SAMPLERS = ("tpe", "random", "cmaes", "gp", "grid")
DEFAULT_SAMPLER = "tpe"

_NEEDS = {"cmaes": ("cmaes",), "gp": ("torch", "scipy")}

# Samplers that model only COMPLETE trials never see a PRUNED (rejected) proposal and would propose it again and
# again: they are told rejected proposals as COMPLETE with a penalty time instead (outcome "rejected" still).
_BLIND_TO_PRUNED = ("gp",)


def learns_from_pruned(name: str) -> bool:
    return name not in _BLIND_TO_PRUNED


# The seed also seeds numpy's generator of the random inputs, whose legacy seeding takes 32 bits unsigned.
SEED_MAX = 2**32 - 1


def check_seed(seed: int | None) -> None:
    """A seed numpy and Optuna both take (``InvalidArgument`` otherwise, before any work)."""
    if seed is not None and not (isinstance(seed, int) and 0 <= seed <= SEED_MAX):
        raise InvalidArgument(f"--seed must be between 0 and {SEED_MAX} (2**32 - 1), got {seed}")


def make_sampler(name: str, seed: int | None = None) -> optuna.samplers.BaseSampler:
    check_seed(seed)
    if name not in SAMPLERS:
        raise InvalidArgument(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}")
    missing = [m for m in _NEEDS.get(name, ()) if importlib.util.find_spec(m) is None]
    if missing:
        raise InvalidArgument(f"sampler {name} needs {' and '.join(missing)}: pip install {' '.join(missing)}")
    if name == "tpe":
        # Multivariate TPE models the interactions of tile sizes; constant liar keeps the proposals made while
        # earlier candidates are still compiling or on the GPU apart from each other.
        # group=True: each algorithm's parameters form their own group (define-by-run conditional spaces).
        # CachingTPESampler: Optuna's TPE, the same proposals, cheaper per trial (autotune.tuning.tpe).
        return CachingTPESampler(seed=seed, multivariate=True, group=True, constant_liar=True)
    if name == "cmaes":
        # Our parameters are categorical: CMA-ES handles none of them itself and leaves them to TPE.
        return optuna.samplers.CmaEsSampler(
            seed=seed,
            independent_sampler=optuna.samplers.TPESampler(seed=seed),
            warn_independent_sampling=False,
        )
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False)
    return optuna.samplers.RandomSampler(seed=seed)
