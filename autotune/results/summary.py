"""What the studies in a database hold, for `autotune studies`, `show` and `report`.

Everything is read from Optuna's trials and the user attributes our search writes (autotune.results.studies); nothing
is written. A study is named by its full name or any unique prefix of it.
"""

from __future__ import annotations

import collections
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import InvalidArgument, StorageError
from autotune.results import studies
from autotune.results.storage import Database


@dataclass
class StudySummary:
    name: str
    kernel: str | None  # None (and shape, dtype, device): a study autotune did not make, e.g. Optuna's own
    shape: str | None
    dtype: str | None
    device: str | None
    metric_unit: str
    complete: int
    failed: dict[str, int]  # by failure kind
    rejected: int
    duplicates: int
    interrupted: int
    best_ms: float | None
    best_metric: float | None
    best_trial: int | None
    default_ms: float | None
    last_update: dt.datetime | None
    worker_restarts: int = 0
    trials: int = 0  # every trial, measured or not

    @property
    def by_autotune(self) -> bool:
        return self.kernel is not None

    @property
    def speedup(self) -> float | None:
        if self.best_ms and self.default_ms:
            return self.default_ms / self.best_ms
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "kernel": self.kernel, "shape": self.shape, "dtype": self.dtype, "device": self.device,
            "metric_unit": self.metric_unit, "trials_complete": self.complete, "trials_failed": self.failed,
            "trials_rejected": self.rejected, "duplicates": self.duplicates, "interrupted": self.interrupted,
            "best_time_ms": self.best_ms, "best_metric": self.best_metric, "best_trial": self.best_trial,
            "default_time_ms": self.default_ms, "speedup_over_default": self.speedup,
            "last_update": self.last_update.isoformat(timespec="seconds") if self.last_update else None,
            "worker_restarts": self.worker_restarts, "trials_total": self.trials,
        }  # fmt: skip


@dataclass
class TrialRow:
    number: int
    params: dict[str, Any]
    time_ms: float  # re-timed with the leaders where it was, else the search's median
    retimed: bool
    metric: float | None
    registers: int | None
    shared_bytes: int | None
    spill_bytes: int | None
    compile_s: float | None
    spread: float | None
    role: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class StudyDetails:
    summary: StudySummary
    top: list[TrialRow]
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind → {count, example, trial}

    def to_dict(self) -> dict[str, Any]:
        return {"study": self.summary.to_dict(), "top": [t.to_dict() for t in self.top], "failures": self.failures}


class Reader:
    """Read-only access to the studies of one database."""

    def __init__(self, url: str) -> None:
        self.database = Database(url, create=False)
        with self.database.engine.connect() as conn:
            self.has_studies = sa.inspect(conn).has_table("studies")
        self.storage = self.database.optuna_storage(read_only=True) if self.has_studies else None

    def close(self) -> None:
        if self.storage is not None:
            self.storage.engine.dispose()
        self.database.close()

    def names(self) -> list[str]:
        if self.storage is None:
            return []
        return sorted(s.study_name for s in optuna.get_all_study_summaries(self.storage, include_best_trial=False))

    def resolve(self, name_or_prefix: str) -> str:
        """The study named ``name_or_prefix`` or, failing that, the only one starting with it."""
        names = self.names()
        if not names:
            raise InvalidArgument(f"no studies in {self.database.url.removeprefix('sqlite:///')}")
        if name_or_prefix in names:
            return name_or_prefix
        matches = [n for n in names if n.startswith(name_or_prefix)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise InvalidArgument(f"no study {name_or_prefix!r}; studies: {', '.join(names[:6])}"
                                  + (f" and {len(names) - 6} more" if len(names) > 6 else ""))  # fmt: skip
        raise InvalidArgument(f"{name_or_prefix!r} is ambiguous: it starts {', '.join(matches[:6])}")

    def study(self, name: str) -> optuna.Study:
        return optuna.load_study(study_name=name, storage=self.storage)

    def summary(self, name: str, study: optuna.Study | None = None) -> StudySummary:
        study = study or self.study(name)
        attrs = study.user_attrs
        trials = study.get_trials(deepcopy=False)
        outcome = collections.Counter(t.user_attrs.get(studies.OUTCOME) for t in trials)
        failed = collections.Counter(
            t.user_attrs.get(studies.FAILURE, "?") for t in trials if studies.is_measured(t) and t.state == TrialState.FAIL
        )
        ranked = self.ranked(study)
        default = next((r for r in ranked if r.role == "default"), None)
        finished = [t.datetime_complete for t in trials if t.datetime_complete is not None]
        ours = "kernel" in attrs  # our search records the kernel first of all
        return StudySummary(
            name=study.study_name,
            kernel=attrs.get("kernel"),
            shape=attrs.get("shape"),
            dtype=attrs.get("dtype", "float32") if ours else None,  # studies from before dtypes were float32
            device=(attrs.get("device") or {}).get("name"),
            metric_unit=attrs.get("metric_unit", ""),
            complete=sum(1 for t in trials if studies.is_measured(t) and t.state == TrialState.COMPLETE),
            failed=dict(sorted(failed.items())),
            rejected=outcome[studies.REJECTED],
            duplicates=outcome[studies.DUPLICATE],
            interrupted=sum(1 for t in trials if studies.is_interrupted(t)),
            best_ms=ranked[0].time_ms if ranked else None,
            best_metric=ranked[0].metric if ranked else None,
            best_trial=ranked[0].number if ranked else None,
            default_ms=default.time_ms if default else None,
            last_update=max(finished) if finished else None,
            worker_restarts=int(attrs.get("worker_restarts", 0)),
            trials=len(trials),
        )  # fmt: skip

    def ranked(self, study: optuna.Study) -> list[TrialRow]:
        """Complete measured trials, fastest first; the re-timed leaders (compared side by side) lead."""
        retimed = {int(k): v for k, v in (study.user_attrs.get("retime") or {}).get("times_ms", {}).items()}
        rows = []
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if studies.is_measured(t):
                rows.append(_row(t, retimed.get(t.number)))
        rows.sort(key=lambda r: (not r.retimed, r.time_ms))
        return rows

    def details(self, name: str, top: int) -> StudyDetails:
        study = self.study(name)
        failures: dict[str, dict[str, Any]] = {}
        for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
            if not studies.is_measured(t):
                continue
            kind = t.user_attrs.get(studies.FAILURE, "?")
            entry = failures.setdefault(kind, {"count": 0, "example": t.user_attrs.get(studies.REASON, ""),
                                               "trial": t.number, "params": t.params})  # fmt: skip
            entry["count"] += 1
        return StudyDetails(self.summary(name, study), self.ranked(study)[:top], dict(sorted(failures.items())))

    def summaries(self, kernel: str | None = None, device: str | None = None) -> list[StudySummary]:
        rows = [self.summary(n) for n in self.names()]
        return [r for r in rows if (kernel is None or r.kernel == kernel) and (device is None or r.device == device)]


def _row(t: FrozenTrial, retimed_ms: float | None) -> TrialRow:
    m = t.user_attrs.get(studies.MEASUREMENT) or {}
    timing = m.get("timing") or {}
    time_ms = retimed_ms if retimed_ms is not None else float(t.value)  # type: ignore[arg-type]
    metric = t.user_attrs.get(studies.METRIC)
    if retimed_ms is not None and metric is not None and t.value:
        metric = metric * float(t.value) / retimed_ms  # the metric at the re-timed speed
    median = timing.get("median")
    spread = (timing.get("q3", 0) - timing.get("q1", 0)) / median if median else None
    return TrialRow(
        number=t.number,
        params=dict(t.params),
        time_ms=time_ms,
        retimed=retimed_ms is not None,
        metric=metric,
        registers=m.get("registers"),
        shared_bytes=m.get("shared_bytes"),
        spill_bytes=m.get("spill_bytes"),
        compile_s=m.get("compile_s"),
        spread=spread,
        role=t.user_attrs.get(studies.ROLE),
    )


def open_reader(url: str) -> Reader:
    try:
        return Reader(url)
    except sa.exc.SQLAlchemyError as exc:
        raise StorageError(f"cannot read {url}: {exc}") from None
