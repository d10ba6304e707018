"""The end of a search (autotune/tuning/ranking.py): which trials are timed again side by side, and the ranking."""

from __future__ import annotations

from typing import Sequence

import pytest
from conftest import H200
from optuna.trial import TrialState

from autotune.results import studies
from autotune.spaces import config_key, get_space
from autotune.tuning.evaluation.base import Evaluator, Timing, Toolchain
from autotune.tuning.ranking import Known, rank


class Retimer(Evaluator):
    """Answers a re-timing with each configuration's time in ``times``, and remembers what it was asked."""

    device = H200
    toolchain = Toolchain()

    def __init__(self, times: dict[str, float]) -> None:
        self.times = times
        self.asked: list[list[float]] = []

    def submit(self, config):  # pragma: no cover - a ranking submits nothing
        raise AssertionError("rank only re-times")

    def retime(self, configs: Sequence[dict], rounds: int) -> list[Timing | None]:
        ms = [self.times[config_key(c)] for c in configs]
        self.asked.append(ms)
        return [Timing.of([t] * 3) for t in ms]


@pytest.mark.parametrize("default_ms, rule_ms, retimed", [
    (1.5, 1.9, {1.0, 1.1, 1.2, 1.5, 1.9}),  # within twice the fastest: side by side with the leaders
    (2.5, 1.9, {1.0, 1.1, 1.2, 1.9}),  # the template's default is clearly slower: its search time stands
    (2.5, 3.0, {1.0, 1.1, 1.2}),  # both clearly slower
])  # fmt: skip
def test_defaults_are_retimed_only_within_twice_the_fastest(default_ms, rule_ms, retimed):
    space = get_space("gemm")
    base = dict(space.default_config)
    known = [Known(i, TrialState.COMPLETE, t, dict(base, BM=bm), {}) for i, (t, bm) in enumerate(((1.0, 16), (1.1, 32),
                                                                                                  (1.2, 256)))]  # fmt: skip
    known.append(Known(10, TrialState.COMPLETE, default_ms, dict(base), {}))
    known.append(Known(11, TrialState.COMPLETE, rule_ms, dict(base, BN=512), {studies.ROLE: studies.RULE}))
    evaluator = Retimer({config_key(k.config): k.value for k in known})
    ranked = rank(known, space, (256, 256, 256), evaluator, top=3, rounds=5)
    assert set(evaluator.asked[0]) == retimed
    assert {r.time_ms for r in ranked if r.retimed} == retimed
    assert [r.time_ms for r in ranked if not r.retimed] == sorted({1.0, 1.1, 1.2, default_ms, rule_ms} - retimed)
    assert ranked[0].time_ms == 1.0 and ranked[0].retimed
