"""Warm starts: a new study measures first what the database already knows to be good.

Seeds, in this order, each source's leaders (fastest complete trials) first:

* ``--from STUDY``: an explicit study of the same kernel;
* the same kernel and dtype on this device, at the nearest tuned shapes (distance: the sum of |log2| ratios
  of the dimensions), since the best tiles move slowly with the shape;
* the same kernel and dtype on other devices of the same architecture (compute capability).

Seeds are ordinary trials (they count toward --trials) enqueued after the default configuration, with the
trial attributes ``role = "seed"`` and ``seed_from = "<study>#<trial>"``. A seed outside this space's (possibly
narrowed) domains or invalid at this shape is skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace, config_key
from autotune.spaces.optuna_mapping import config_of

FROM_LEADERS = 5  # leaders taken from --from STUDY
NEAR_SHAPES = 3  # nearest tuned shapes of this device
NEAR_LEADERS = 3  # leaders taken from each of them
OTHER_DEVICES = 2  # nearest studies on other devices of the same architecture
OTHER_LEADERS = 2
MAX_FRACTION = 0.25  # seeds never take more than this share of the trials


@dataclass
class _Candidate:
    name: str
    distance: float


def shape_distance(a: Shape, b: Shape) -> float:
    """How far apart two shapes are for tuning purposes: the sum of |log2(a_i / b_i)|."""
    if len(a) != len(b):
        return math.inf
    return sum(abs(math.log2(max(x, 1) / max(y, 1))) for x, y in zip(a, b))


def find_study(storage: Any, name: str) -> str:
    """The study called ``name``, or the only one whose name starts with it; one clear line otherwise."""
    names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    if name in names:
        return name
    matches = [n for n in names if n.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InvalidArgument(f"--from {name}: no such study in this database")
    more = ", ..." if len(matches) > 3 else ""
    raise InvalidArgument(f"--from {name}: {len(matches)} studies start with it ({', '.join(matches[:3])}{more})")


def leaders(storage: Any, name: str, count: int) -> list[tuple[dict[str, Any], int]]:
    """The fastest ``count`` measured, complete trials of a study: (params, trial number)."""
    study = optuna.load_study(study_name=name, storage=storage)
    complete = [
        t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if studies.is_measured(t) and t.value is not None
    ]  # fmt: skip
    complete.sort(key=lambda t: t.value)
    return [(dict(t.params), t.number) for t in complete[:count]]


def _parse(shape: str) -> Shape | None:
    try:
        return tuple(int(d) for d in shape.split("x"))
    except (ValueError, AttributeError):
        return None


def _related(storage: Any, space: KernelSpace, shape: Shape, device: DeviceInfo, exclude: str | None
             ) -> tuple[list, list]:  # fmt: skip
    """Other studies of the same kernel and dtype: on this device (other shapes, or an older template) and on
    other devices of the same architecture."""
    here, elsewhere = [], []
    # Study records only: Optuna's study summaries read every trial of every study (minutes on a large file).
    for summary in optuna.storages.get_storage(storage).get_all_studies():
        attrs = summary.user_attrs
        if summary.study_name == exclude:
            continue
        if attrs.get("kernel") != space.name or attrs.get("dtype") != space.dtype:
            continue
        other = _parse(attrs.get("shape", ""))
        dev = attrs.get("device") or {}
        if other is None:
            continue
        distance = shape_distance(shape, other)
        if dev.get("name") == device.name:
            here.append(_Candidate(summary.study_name, distance))
        elif tuple(dev.get("compute_capability", ())) == tuple(device.compute_capability):
            elsewhere.append(_Candidate(summary.study_name, distance))
    here.sort(key=lambda c: (c.distance, c.name))
    elsewhere.sort(key=lambda c: (c.distance, c.name))
    return here, elsewhere


def seeds(
    storage: Any,
    space: KernelSpace,
    shape: Shape,
    device: DeviceInfo,
    trials: int,
    *,
    from_study: str | None = None,
    exclude: str | None = None,
) -> list[tuple[Config, str]]:
    """Configurations to measure first in a new study of ``space`` at ``shape`` on ``device``, with where each
    comes from; at most ``MAX_FRACTION`` of ``trials``. ``exclude``: the new study itself."""
    limit = int(trials * MAX_FRACTION)
    if limit < 1:
        return []
    plan: list[tuple[str, int]] = []
    if from_study is not None:
        plan.append((from_study, FROM_LEADERS))
    here, elsewhere = _related(storage, space, shape, device, exclude)
    plan += [(c.name, NEAR_LEADERS) for c in here[:NEAR_SHAPES]]
    plan += [(c.name, OTHER_LEADERS) for c in elsewhere[:OTHER_DEVICES]]
    out: list[tuple[Config, str]] = []
    seen: set[str] = set()
    for name, count in plan:
        for params, number in leaders(storage, name, count):
            config = config_of(space, params)
            key = config_key(config)
            if key in seen or space.violations(config, shape, device):
                continue
            seen.add(key)
            out.append((config, f"{name}#{number}"))
            if len(out) >= limit:
                return out
    return out
