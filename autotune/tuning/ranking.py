"""The end of a search: the leaders and the defaults re-timed side by side, the winner the fastest re-timed, and
the winner's row in the store.

Times measured during the search come one candidate at a time, minutes apart, with the GPU's clocks and
neighbours changing; the best few, the template's default (the baseline of the speedup) and the rule default for
the shape (what the dispatcher runs untuned) are therefore timed again together, round-robin, so that the ranking
compares like with like, and a stored winner is not one that a noisy search-time measurement of the rule default
let pass although it is slower than it. A default whose search time is over the race line (twice the fastest,
`autotune.tuning.evaluation.racing`) is not timed again: no noise makes it a leader, and at 8192³ fp32 the
template's default (34 ms against 9) took a third of the re-timing; its own time stands, marked as not re-timed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

import optuna
from optuna.trial import TrialState

from autotune.results import studies
from autotune.results.storage import BestEntry
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace, config_key
from autotune.tuning.evaluation.base import Evaluator
from autotune.tuning.evaluation.racing import RACE_FACTOR

if TYPE_CHECKING:
    from autotune.tuning.search_report import SearchReport


@dataclass
class Ranked:
    trial_number: int
    config: Config
    time_ms: float  # re-timed median where re-timed, else the search's median
    metric: float
    registers: int | None
    retimed: bool
    spread: float | None = None  # interquartile range / median of the timing used


@dataclass
class Known:
    number: int
    state: TrialState
    value: float | None
    config: Config
    attrs: dict[str, Any]


def rank(
    known: Iterable[Known], space: KernelSpace, shape: Shape, evaluator: Evaluator, top: int, rounds: int
) -> list[Ranked]:
    """Every complete trial ranked: the re-timed ones first (fastest first), then the rest by their search time."""
    complete = sorted(
        (k for k in known if k.state == TrialState.COMPLETE and k.value is not None),
        key=lambda k: k.value,  # type: ignore[arg-type, return-value]
    )
    if not complete:
        return []
    candidates = complete[:top]
    default = next((k for k in complete if config_key(k.config) == config_key(space.default_config)), None)
    rule = next((k for k in complete if k.attrs.get(studies.ROLE) == studies.RULE), None)
    line = RACE_FACTOR * complete[0].value  # type: ignore[operator]
    candidates += [k for k in (default, rule) if k is not None and k not in candidates and k.value <= line]  # type: ignore[operator]
    timings = evaluator.retime([k.config for k in candidates], rounds)
    ranked = [
        _ranked(k, space, shape, timing.median, True, timing.spread)
        for k, timing in zip(candidates, timings)
        if timing is not None  # cannot be run again: not a trustworthy winner
    ]
    retimed = {r.trial_number for r in ranked}
    ranked += [_ranked(k, space, shape, k.value, False, None) for k in complete if k.number not in retimed]  # type: ignore[arg-type]
    # Re-timed entries first, fastest first: they were measured side by side and compare fairly.
    ranked.sort(key=lambda r: (not r.retimed, r.time_ms))
    return ranked


def rank_into(report: SearchReport, study: optuna.Study, known: Iterable[Known], space: KernelSpace, shape: Shape,
              evaluator: Evaluator, top: int, rounds: int) -> None:  # fmt: skip
    """The end of a search: `rank` its trials into ``report`` (its ranking, the default's and the rule default's
    entries) and record the re-timed times on ``study`` (attribute ``retime``)."""
    known = list(known)
    ranked = rank(known, space, shape, evaluator, top, rounds)
    if not ranked:
        return
    default_key = config_key(space.default_config)
    report.ranking = ranked
    report.default = next((r for r in ranked if config_key(r.config) == default_key), None)
    rules = {k.number for k in known if k.attrs.get(studies.ROLE) == studies.RULE}
    report.rule = next((r for r in ranked if r.trial_number in rules), None)
    study.set_user_attr(
        "retime",
        {
            "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "rounds": rounds,
            "times_ms": {str(r.trial_number): r.time_ms for r in ranked if r.retimed},
        },
    )


def _ranked(known: Known, space: KernelSpace, shape: Shape, time_ms: float, retimed: bool,
            spread: float | None) -> Ranked:  # fmt: skip
    return Ranked(
        trial_number=known.number,
        config=known.config,
        time_ms=time_ms,
        metric=space.metric(shape, time_ms),
        registers=known.attrs.get(studies.REGISTERS),
        retimed=retimed,
        spread=spread,
    )


def winner_entry(report: SearchReport, space: KernelSpace, evaluator: Evaluator, template_hash: str) -> BestEntry:
    """The row of a search's winner in the store of best configurations (`autotune.results.storage`)."""
    best = report.best
    assert best is not None
    return BestEntry(
        device_name=evaluator.device.name,
        compute_capability=evaluator.device.cc,
        kernel=space.name,
        shape=report.shape,
        dtype=space.dtype,
        template_hash=template_hash,
        params=best.config,
        time_ms=best.time_ms,
        metric=best.metric,
        metric_unit=space.metric_unit,
        default_time_ms=report.default.time_ms if report.default else None,
        driver_version=evaluator.device.driver_version,
        nvcc_version=evaluator.toolchain.nvcc,
        study_name=report.study_name,
        trial_number=best.trial_number,
        code_hash=evaluator.code_hash(best.config),
    )
