"""Joining a study from another host: ``autotune worker --db postgresql://... STUDY``.

The study's attributes say everything a host needs to take part: kernel, shape, dtype, the narrowed domains,
the template's hash, the device and the target number of trials. A joining host rebuilds the space from them,
checks that it measures the same thing (same GPU model, same template), and runs the ordinary search loop on
the shared study: each host's in-flight trials carry heartbeats, finished trials of every host count toward
the target, and a host that vanishes leaves its RUNNING trials to the stale sweep of the others.
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any, Callable

import optuna

from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.results.storage import Database, check_database, resolve_url
from autotune.spaces import get_space
from autotune.templates import short_hash
from autotune.tuning.evaluation.base import Evaluator
from autotune.tuning.samplers import DEFAULT_SAMPLER, make_sampler
from autotune.tuning.search_report import Progress, SearchReport, SearchSettings
from autotune.tuning.tune import check_trials, run_study

REQUIRED = ("kernel", "shape", "dtype", "device", "template_hash", "domains")


def wait_for_study(storage: Any, name: str, wait_s: float, keys: tuple[str, ...] = REQUIRED) -> dict[str, Any]:
    """The attributes of study ``name`` once it exists and holds ``keys``; waits up to ``wait_s`` seconds.

    A starting search writes its attributes one at a time, so a host that sees the study may not see all of
    them yet: it waits for every key it needs, not for the study alone."""
    deadline = time.monotonic() + wait_s
    attrs: dict[str, Any] | None = None
    while True:
        try:
            study_id = storage.get_study_id_from_name(name)
            attrs = storage.get_study_user_attrs(study_id)
            if all(k in attrs for k in keys):
                return attrs
        except KeyError:
            pass
        if time.monotonic() >= deadline:
            if attrs is not None and all(k in attrs for k in REQUIRED):
                return attrs  # the caller says what is missing
            if attrs is not None:
                raise InvalidArgument(f"study {name!r} was not made by an autotune search: it cannot be joined")
            hint = " (--wait SECONDS waits for a search that is starting)" if wait_s <= 0 else ""
            raise InvalidArgument(f"no study {name!r} in this database{hint}")
        time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))


def join(
    study_name: str,
    *,
    db: str | None = None,
    trials: int | None = None,
    seed: int | None = None,
    timeout_s: float | None = None,
    wait_s: float = 0.0,
    replay: str | None = None,
    evaluator: Evaluator | None = None,
    device_ordinal: int = 0,
    on_progress: Callable[[Progress], None] | None = None,
    settings: SearchSettings | None = None,
) -> SearchReport:
    """Take part in an existing study until it holds its target trials (``trials`` overrides the target).

    ``replay``: answer from a recording instead of the GPU (as `tune`); ``evaluator`` replaces the GPU."""
    if trials is not None:
        check_trials(trials)
    url = resolve_url(db)
    check_database(url, create=wait_s > 0)  # waiting: the search that makes it may not have started
    database = Database(url)
    storage = None
    owned = False
    try:
        base = settings or SearchSettings(trials=trials or 1)
        storage = database.optuna_storage(heartbeat_s=base.heartbeat_s)
        # Without --trials the host needs the target too, which the search writes after the study's attributes.
        keys = REQUIRED if trials is not None else REQUIRED + (studies.TARGET,)
        attrs = wait_for_study(storage, study_name, wait_s, keys)
        space = get_space(attrs["kernel"], attrs["domains"], dtype=attrs["dtype"])
        shape = space.parse_shape(attrs["shape"])
        target = trials if trials is not None else int(attrs.get(studies.TARGET, 0))
        if target < 1:
            raise InvalidArgument(f"study {study_name} records no target: give --trials")
        template_hash = attrs["template_hash"]
        if evaluator is None and replay is not None:
            from autotune.tuning.evaluation.replay import RecordedMeasurements, ReplayEvaluator

            recording = RecordedMeasurements.load(replay)
            evaluator, local_hash = ReplayEvaluator(recording), recording.template_hash
        elif evaluator is None:
            from autotune.runtime.compiler import find_nvcc
            from autotune.tuning.evaluation.gpu import GpuEvaluator

            find_nvcc()
            local_hash = space.template_hash()
            if local_hash == template_hash:  # before the GPU worker starts
                evaluator = GpuEvaluator(space, shape, seed=seed or 0, timeout_s=timeout_s,
                                         flush_l2=attrs.get("l2_flush", True), device_ordinal=device_ordinal)  # fmt: skip
            owned = evaluator is not None
        else:
            local_hash = template_hash
        if local_hash != template_hash:
            raise InvalidArgument(
                f"study {study_name} measures template {short_hash(template_hash)}; this host has "
                f"{short_hash(local_hash)}: install the same autotune version on every host"
            )
        assert evaluator is not None
        owned = owned or replay is not None
        wanted = attrs["device"].get("name")
        if evaluator.device.name != wanted:
            raise InvalidArgument(
                f"study {study_name} is for {wanted}; this host's GPU is {evaluator.device.name}: "
                "times of different GPU models are not comparable"
            )
        sampler_name = attrs.get(studies.SAMPLER, DEFAULT_SAMPLER)
        seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        study = optuna.load_study(study_name=study_name, storage=storage, sampler=make_sampler(sampler_name, seed))
        run_settings = dataclasses.replace(base, trials=target, sampler=sampler_name, seed=seed)
        return run_study(database, storage, study, space, shape, evaluator, template_hash, run_settings,
                         on_progress=on_progress)  # fmt: skip
    finally:
        if owned and evaluator is not None:
            evaluator.close()
        if storage is not None:
            storage.engine.dispose()
        database.close()
