"""How a search begins on its study: the space it proposes from, and the configurations a new study measures first.

A new study measures the template's default configuration first (the baseline of the speedup), then the space's
rule-based default for the shape (so a tuned result is never slower than the untuned dispatcher's choice), then
the warm-start seeds (`autotune.tuning.warmstart`); all are ordinary measured trials, marked by their role.
"""

from __future__ import annotations

from typing import Sequence

import optuna

from autotune.device import DeviceInfo
from autotune.results import studies
from autotune.shape import Shape
from autotune.spaces.base import ALGO, Config, KernelSpace, config_key
from autotune.spaces.optuna_mapping import optuna_params


def proposal_space(space: KernelSpace, study: optuna.Study, shape: Shape, device: DeviceInfo) -> KernelSpace:
    """What the sampler proposes from: the space without the algorithms that cannot compute this shape on this
    device. A study begun before that narrowing keeps the algorithm choices it recorded (Optuna refuses to
    change a parameter's distribution within a study)."""
    recorded = next((t.distributions[ALGO].choices for t in study.get_trials(deepcopy=False)
                     if ALGO in t.distributions), None)  # fmt: skip
    if recorded is not None and not set(recorded) <= set(space.domain(ALGO)):
        recorded = None
    return space.for_problem(shape, device, recorded)


def enqueue_starts(
    study: optuna.Study, space: KernelSpace, shape: Shape, device: DeviceInfo, seeds: Sequence[tuple[Config, str]]
) -> list[str]:
    """Enqueue the first trials of a new study (see the module); returns where each enqueued seed comes from."""
    default = dict(space.default_config)
    queued = set()
    enqueued: list[str] = []
    if not space.violations(default, shape, device):
        study.enqueue_trial(optuna_params(space, default), user_attrs={studies.ROLE: "default"})
        queued.add(config_key(default))
    rule = rule_default(space, shape, device)
    if rule is not None and config_key(rule) not in queued and not space.violations(rule, shape, device):
        study.enqueue_trial(optuna_params(space, rule), user_attrs={studies.ROLE: studies.RULE})
        queued.add(config_key(rule))
    for config, source in seeds:
        key = config_key(config)
        if key in queued or space.violations(config, shape, device):
            continue
        queued.add(key)
        enqueued.append(source)
        study.enqueue_trial(optuna_params(space, config),
                            user_attrs={studies.ROLE: studies.SEED, studies.SEED_FROM: source})  # fmt: skip
    return enqueued


def rule_default(space: KernelSpace, shape: Shape, device: DeviceInfo) -> Config | None:
    """What the dispatcher runs at this shape untuned; None where the space's rule does not apply to its own
    parameters (a subclass that dropped or renamed a parameter the inherited rule picks)."""
    try:
        rule = space.rule_default(shape, device)
    except KeyError:
        return None
    return rule if set(rule) <= {p.name for p in space.params} else None
