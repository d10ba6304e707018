"""Dump what replayed searches do, to JSON: run it before and after a refactoring of autotune/tuning/ and
compare (the two files must be identical byte for byte).

Searches (CPU only, measurements replayed): the synthetic GEMM recording of tests/synthetic.py (with failures)
under every sampler installed, several seeds, a resumed search (two runs on one study), a grid walk, a narrowed
space with duplicates; and the recorded H200 GEMM measurements of tests/data/replay_gemm_h200.json. For each:
every trial of the study in order (state, value, parameters, user attributes less the measurement's timestamps),
the report's counts, ranking and default, and every progress event the search emitted.

Usage: python3 docs/results/2026-11-25b/dump_search.py OUT.json [ROOT]
ROOT: the directory whose autotune/ is run (default: this worktree), e.g. an exported older commit; the
recordings come from this worktree's tests/.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[3]
ROOT = Path(sys.argv[2] if len(sys.argv) > 2 else HERE)
sys.path.insert(0, str(HERE / "tests"))  # synthetic.py, conftest.py (H200)
sys.path.insert(0, str(ROOT))

import optuna  # noqa: E402

from autotune.results.storage import resolve_url  # noqa: E402
from autotune.tuning.evaluation import ReplayEvaluator  # noqa: E402
from autotune.tuning.evaluation.replay import RecordedMeasurements  # noqa: E402
from autotune.tuning.samplers import SAMPLERS, make_sampler  # noqa: E402
from autotune.tuning.search_report import SearchSettings  # noqa: E402
from autotune.tuning.tune import tune  # noqa: E402

from synthetic import DOMAINS, SHAPE, make_recording  # noqa: E402

VOLATILE = ("started", "finished", "heartbeat", "host", "pid", "_s")  # wall-clock dependent attributes


def plain(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return plain(dataclasses.asdict(x))
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items() if not any(str(k).endswith(v_) for v_ in VOLATILE)}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, float):
        return repr(x)
    return x


def study_dump(db: Path, name: str) -> list:
    study = optuna.load_study(study_name=name, storage=resolve_url(db))
    return [
        {"number": t.number, "state": t.state.name, "value": plain(t.value), "params": plain(t.params),
         "attrs": plain(t.user_attrs)}
        for t in study.trials
    ]  # fmt: skip


def report_dump(report: Any) -> dict:
    return {
        "counts": {k: getattr(report, k) for k in ("measured_total", "measured_now", "rejected_now", "rejected_total",
                                                   "duplicates_now", "repaired_now", "moved_now", "restarts")},
        "failures": dict(report.failures),
        "failure_examples": report.failure_examples,
        "seeds": report.seeds,
        "stopped_early": report.stopped_early,
        "ranking": plain([dataclasses.asdict(r) for r in report.ranking]),
        "default": plain(report.default),
        "profile_measured": [report.profile.measured, report.profile.compiled, report.profile.cached],
    }  # fmt: skip


def run(label: str, out: dict, tmp: Path, db_name: str, **kwargs: Any) -> None:
    events: list = []
    db = tmp / db_name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = tune(db=str(db), on_progress=lambda p: events.append(plain(p)), **kwargs)
    out[label] = {"report": report_dump(report), "progress": events, "study": study_dump(db, report.study_name)}


def main() -> None:
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        rec_path = tmp / "rec.json"
        make_recording(rec_path)
        for sampler in SAMPLERS:
            try:
                make_sampler(sampler, 0)
            except Exception as exc:  # not installed here: said in the output
                out[f"{sampler}: unavailable"] = str(exc)
                continue
            for seed in (0, 3):
                trials = 200 if sampler == "grid" else 40
                run(f"synthetic {sampler} seed {seed}", out, tmp, f"{sampler}{seed}.db", kernel="gemm",
                    trials=trials, replay=str(rec_path), seed=seed, sampler=sampler)  # fmt: skip
        run("resume: first 15", out, tmp, "resume.db", kernel="gemm", trials=15, replay=str(rec_path), seed=7)
        run("resume: then 35", out, tmp, "resume.db", kernel="gemm", trials=35, replay=str(rec_path), seed=8)
        small = dict(DOMAINS, BM=[128], BN=[128], BK=[8], TM=[4], A_PAD=[4], GROUP_M=[1], PIPELINE=["double"])
        rec_small = make_recording(tmp / "small.json", small)
        valid = len(rec_small.configs)
        run("duplicates", out, tmp, "small.db", kernel="gemm", shape=SHAPE, sampler="random", seed=1,
            evaluator=ReplayEvaluator(rec_small), template_hash=rec_small.template_hash, domains=small,
            settings=SearchSettings(trials=valid, patience=10_000), trials=valid)  # fmt: skip
        real = HERE / "tests" / "data" / "replay_gemm_h200.json"
        rec_real = RecordedMeasurements.load(real)
        for sampler, seed in (("tpe", 0), ("random", 5)):
            run(f"h200 {sampler} seed {seed}", out, tmp, f"real{sampler}.db", kernel="gemm", trials=60,
                replay=str(real), seed=seed, sampler=sampler, shape=tuple(rec_real.shape))  # fmt: skip
    text = json.dumps(out, indent=1)
    Path(sys.argv[1]).write_text(text)
    import autotune

    print(f"autotune from {Path(autotune.__file__).parent}: {len(out)} searches, "
          f"sha256 {hashlib.sha256(text.encode()).hexdigest()}")  # fmt: skip


if __name__ == "__main__":
    main()
