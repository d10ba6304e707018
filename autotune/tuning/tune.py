"""`tune`: a kernel name, a shape and a database wired to a `Search`, which the command line and the Python API both
call; `run_study` searches an opened study to its target and stores its winner (`tune`, and hosts joining a study).

Everything is checked before anything is written: bad arguments, the database location, nvcc, the GPU and pycuda.
The GPU worker then comes up beside the first compiles: one that fails its set-up stops the search as a crash
would (its trials in flight recorded as interrupted).
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING, Any, Callable, Sequence

import optuna

from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.results.storage import Database, check_database, resolve_url
from autotune.shape import Shape, format_shape
from autotune.spaces import get_space
from autotune.spaces.base import Config, KernelSpace
from autotune.tuning.claims import Claims
from autotune.tuning.evaluation.base import Evaluator
from autotune.tuning.ranking import winner_entry
from autotune.tuning.samplers import DEFAULT_SAMPLER, make_sampler
from autotune.tuning.search import Search
from autotune.tuning.search_report import Progress, SearchReport, SearchSettings

if TYPE_CHECKING:
    from autotune.tuning.evaluation.worker_start import WorkerHandoff


def check_trials(trials: int) -> None:
    if trials < 1:
        raise InvalidArgument(f"--trials must be at least 1, got {trials}")


def candidates_in_flight(jobs: int, gpus: int, compile_batch: int = 1) -> int:
    """Candidates a search keeps compiling or waiting at once: compilation is the bottleneck of a cold search, so
    every nvcc job stays busy while a few compiled candidates wait for, or are on, the GPU(s). With compiles in
    batches, each job takes up to ``compile_batch`` waiting candidates of one group into one front end: a unit forms
    only from candidates that wait for a free job, so that many more are asked ahead (with one per job, a freed job
    always finds at most one waiting, and no unit ever formed: 2026-11-28c, call 1)."""
    return jobs * compile_batch + 2 * gpus


def tune(
    kernel: str,
    shape: str | Shape | None = None,
    *,
    trials: int = 200,
    dtype: str | None = None,
    db: str | None = None,
    sampler: str = DEFAULT_SAMPLER,
    seed: int | None = None,
    timeout_s: float | None = None,
    hot_cache: bool = False,
    domains: dict[str, list[Any]] | None = None,
    replay: str | None = None,
    evaluator: Evaluator | None = None,
    template_hash: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    settings: SearchSettings | None = None,
    warm_start: bool = True,
    from_study: str | None = None,
    devices: Sequence[int] | None = None,
    racing: bool = True,
    compile_batch: int = 1,
    handoff: "WorkerHandoff | None" = None,
) -> SearchReport:
    """Search the configurations of ``kernel`` at ``shape`` and store the fastest valid one.

    A new study is warm-started (``warm_start``): the leaders of the same kernel at the nearest tuned shapes
    and on devices of the same architecture, and of ``from_study``, are measured first (`autotune.tuning.warmstart`).
    ``devices``: CUDA ordinals of GPUs of one model that measure for this one study (default: GPU 0).
    ``racing``: a candidate clearly slower than the fastest so far is timed by two runs only
    (`autotune.tuning.evaluation.racing`). ``compile_batch``: candidates that wait for a compile thread together
    share one nvcc front end, up to this many (`autotune.runtime.compiler.Compiler`; 1: each its own).
    ``handoff``: where a one-GPU search takes its GPU worker from and leaves it for the next search of the same
    command (`autotune.tuning.evaluation.worker_start.WorkerHandoff`), instead of starting and stopping one.

    Everything is checked before anything is written: bad arguments, the database location, nvcc, the GPU and
    pycuda (the worker's set-up, beside the first compiles, may still fail: the search then stops as on a crash).
    ``domains`` narrows parameters to subsets of their values. ``replay``: a recording file
    (`autotune.tuning.evaluation.RecordedMeasurements`) answers instead of the GPU — a simulation over the recorded,
    narrowed space. ``evaluator`` replaces the GPU outright; ``template_hash`` then names the template it measured.
    """
    if replay is not None:
        from autotune.tuning.evaluation.replay import RecordedMeasurements, ReplayEvaluator

        if devices is not None:  # a replay measures nothing: GPUs named beside it would be silently ignored
            raise InvalidArgument("--devices and --replay exclude each other: a replay answers from its recording, "
                                  "not from GPUs")  # fmt: skip
        recording = RecordedMeasurements.load(replay)
        if recording.kernel != get_space(kernel).name:
            raise InvalidArgument(f"replay file {replay} holds {recording.kernel}, not {kernel}")
        recorded = recording.dtype or get_space(kernel).dtype  # files from before dtypes: the kernel's first
        wanted = get_space(kernel, dtype=dtype).dtype if dtype is not None else recorded  # "bf16" → "bfloat16"
        if wanted != recorded:
            raise InvalidArgument(f"replay file {replay} was recorded for {recording.kernel} {recorded}, not {wanted}")
        dtype = recorded
        try:
            get_space(kernel, recording.domains, dtype=dtype)
        except InvalidArgument as exc:  # e.g. a parameter the template has since lost: say which file is at fault
            raise InvalidArgument(f"replay file {replay} does not fit {recording.kernel} {dtype} here: {exc}") from None
        domains = recording.domains
        evaluator, template_hash = ReplayEvaluator(recording), recording.template_hash
        if shape is None:
            shape = recording.shape
    space = get_space(kernel, domains, dtype=dtype)
    if shape is None:
        shape_t: Shape = space.default_shape
    elif isinstance(shape, str):
        shape_t = space.parse_shape(shape)
    else:
        shape_t = tuple(int(d) for d in shape)
    check_trials(trials)
    if replay is not None and tuple(shape_t) != tuple(recording.shape):
        raise InvalidArgument(
            f"replay file {replay} was recorded at {format_shape(recording.shape)}, not {format_shape(shape_t)}"
        )
    if timeout_s is not None and not timeout_s > 0:
        raise InvalidArgument(f"--timeout must be positive, got {timeout_s}")
    if compile_batch < 1:
        raise InvalidArgument(f"--compile-batch must be at least 1, got {compile_batch}")
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    sampler_obj = make_sampler(sampler, seed)
    url = resolve_url(db)
    check_database(url, create=True)

    owned = evaluator is None
    if evaluator is None:
        from autotune.runtime.compiler import find_nvcc
        from autotune.tuning.evaluation.gpu import GpuEvaluator

        find_nvcc()  # fail before starting the GPU worker
        template_hash = space.template_hash()
        options = dict(seed=seed, timeout_s=timeout_s, flush_l2=not hot_cache, racing=racing,
                       compile_batch=compile_batch)  # fmt: skip
        if devices is not None and len(devices) > 1:
            from autotune.tuning.evaluation.multi import MultiGpuEvaluator

            evaluator = MultiGpuEvaluator(space, shape_t, devices, **options)
        else:
            ordinal = devices[0] if devices else 0
            started = handoff.take(ordinal) if handoff is not None else None
            evaluator = GpuEvaluator(space, shape_t, device_ordinal=ordinal, started=started, **options)
    elif template_hash is None:
        template_hash = space.template_hash()
    try:
        space.for_problem(shape_t, evaluator.device)  # some algorithm can compute this shape here: before writing
        database = Database(url)
        storage = None
        try:
            run_settings = dataclasses.replace(
                settings or SearchSettings(trials=trials), trials=trials, sampler=sampler, seed=seed
            )
            jobs = getattr(getattr(evaluator, "compiler", None), "jobs", None)
            if settings is None and owned and jobs:
                gpus = len(getattr(evaluator, "evaluators", ())) or 1
                run_settings.in_flight = max(run_settings.in_flight, candidates_in_flight(jobs, gpus, compile_batch))
            storage = database.optuna_storage(heartbeat_s=run_settings.heartbeat_s)
            name = studies.study_name(space.name, format_shape(shape_t), space.dtype, evaluator.device,
                                      template_hash, hot_cache=hot_cache)  # fmt: skip
            attributes = studies.attributes(space, shape_t, evaluator, template_hash, hot_cache)
            if from_study is not None:
                from autotune.tuning.warmstart import find_study

                from_study = find_study(storage, from_study)
            study = studies.open_study(storage, name, sampler_obj, attributes, refresh_s=run_settings.refresh_s)
            study.set_user_attr(studies.SAMPLER, sampler)
            # Last: a joining host that waits for the target finds the sampler and the space already written.
            study.set_user_attr(studies.TARGET, trials)  # what hosts joining with `autotune worker` aim at
            seeds = []
            if warm_start and not study.trials:
                from autotune.tuning import warmstart

                seeds = warmstart.seeds(storage, space, shape_t, evaluator.device, trials, from_study=from_study,
                                        exclude=name)
            return run_study(database, storage, study, space, shape_t, evaluator, template_hash, run_settings,
                             on_progress=on_progress, seeds=seeds)  # fmt: skip
        finally:
            if storage is not None:
                storage.engine.dispose()  # close Optuna's connections now: SQLite checkpoints here, not at GC
            database.close()
    finally:
        if owned:
            try:
                if handoff is not None and hasattr(evaluator, "release_worker"):
                    handoff.keep(evaluator.device_ordinal, evaluator.release_worker())
            finally:
                evaluator.close()


def run_study(
    database: Database,
    storage: Any,
    study: optuna.Study,
    space: KernelSpace,
    shape: Shape,
    evaluator: Evaluator,
    template_hash: str,
    settings: SearchSettings,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    seeds: Sequence[tuple[Config, str]] = (),
) -> SearchReport:
    """Search an opened study to its target and store its winner (`tune`, and hosts joining a study)."""
    liveness = studies.Liveness(storage, settings.heartbeat_s)
    claims = Claims(database.engine, study.study_name, settings.trials)
    search = Search(space, shape, evaluator, study, settings, on_progress=on_progress, liveness=liveness,
                    seeds=seeds, claims=claims)  # fmt: skip
    report = search.run()
    if report.best is not None:
        database.save_best(winner_entry(report, space, evaluator, template_hash))
    return report
