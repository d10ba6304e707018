"""A space's configurations as Optuna parameters (autotune/spaces/optuna_mapping.py): which groups of the
multivariate TPE a proposal can use (the round trip of configurations is in tests/test_algorithms.py)."""

from __future__ import annotations

from autotune.spaces import ALGO, get_space
from autotune.spaces.optuna_mapping import group_used


def test_a_group_is_used_by_the_algorithm_that_owns_it():
    space = get_space("gemm", dtype="float32")
    simt = [p.key for p in space.params if p.algorithm == "simt"]
    tf32x3 = [p.key for p in space.params if p.algorithm == "tf32x3"]
    assert simt and tf32x3 and all(key.startswith("simt.") for key in simt)
    assert group_used(space, [ALGO], {}) is True  # parameters of no algorithm: always
    assert group_used(space, simt, {}) is None  # not known before ALGO is
    assert group_used(space, simt, {ALGO: "simt"}) is True
    assert group_used(space, simt, {ALGO: "tf32x3"}) is False
    assert group_used(space, simt[:2] + tf32x3[:1], {ALGO: "tf32x3"}) is True  # a group shared by two algorithms
