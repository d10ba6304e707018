"""The search driver's own cost (Optuna ask / tell, study reads, SQLite) on CPU, without a GPU.

    python benchmarks/driver_overhead.py --trials 200 [--profile $OUT/driver.prof]

Searches the whole fp32 gemm space (every algorithm) with made-up, deterministic times answered at once, so the
wall time is the driver's: what `autotune search --profile` reports as "optuna (driver)".
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import hashlib
import pstats
import re
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Sequence

import optuna

from autotune.device import DeviceInfo
from autotune.results import studies
from autotune.spaces import config_key
from autotune.tuning.evaluation.base import Evaluator, Measurement, Timing, Toolchain
from autotune.tuning.tune import tune

H100 = DeviceInfo(
    name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0), multiprocessors=132, l2_bytes=52428800,
    total_memory=85_000_000_000, max_threads_per_block=1024, smem_per_block=49152, smem_per_block_optin=232448,
    smem_per_multiprocessor=233472, registers_per_block=65536, registers_per_multiprocessor=65536,
    driver_version="580.0", cuda_driver_api="13.0",
)


def fake_time(config: dict) -> float:
    return 0.5 + int(hashlib.sha256(config_key(config).encode()).hexdigest()[:6], 16) / 0xFFFFFF


class InstantEvaluator(Evaluator):
    """Every configuration runs, in no time, at a time that is a hash of its key."""

    def __init__(self) -> None:
        self.device = H100
        self.toolchain = Toolchain(nvcc="13.0.88")

    def submit(self, config: dict) -> "Future[Measurement]":
        future: Future[Measurement] = Future()
        t = fake_time(config)
        future.set_result(Measurement(ok=True, timing=Timing(t, t, t, t, t, 20), registers=100))
        return future

    def retime(self, configs: Sequence[dict], rounds: int) -> list[Timing | None]:
        return [Timing(fake_time(c), fake_time(c), fake_time(c), fake_time(c), fake_time(c), rounds) for c in configs]


def rejection_reasons(db: str, study_name: str) -> collections.Counter:
    """Why proposals were rejected, by reason with its numbers blanked out."""
    study = optuna.load_study(study_name=study_name, storage=db)
    return collections.Counter(
        re.sub(r"\d+", "#", t.user_attrs.get(studies.REASON, "?"))
        for t in study.get_trials(deepcopy=False)
        if t.user_attrs.get(studies.OUTCOME) == studies.REJECTED
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--profile", type=Path, help="write cProfile stats here and print the top functions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/driver.db"
        profiler = cProfile.Profile() if args.profile else None
        start = time.perf_counter()
        if profiler:
            profiler.enable()
        report = tune("gemm", "4096x4096x4096", dtype="float32", trials=args.trials, db=db, seed=args.seed,
                      sampler=args.sampler, evaluator=InstantEvaluator(), template_hash="driver-overhead",
                      warm_start=False)  # fmt: skip
        if profiler:
            profiler.disable()
        wall = time.perf_counter() - start
        reasons = rejection_reasons(db, report.study_name)
    p = report.profile
    asks = report.measured_now + report.rejected_now + report.duplicates_now
    print(f"{report.measured_now} measured, {report.repaired_now} repaired, {report.moved_now} moved, {report.rejected_now} rejected, {report.duplicates_now} duplicates "
          f"({asks} asks) in {wall:.2f} s; optuna (driver) {p.optuna_s:.2f} s = "
          f"{1000 * p.optuna_s / max(1, report.measured_now):.1f} ms/candidate, "
          f"{1000 * p.optuna_s / max(1, asks):.1f} ms/ask; best {report.best.time_ms if report.best else None}")
    for reason, count in reasons.most_common(8):
        print(f"  rejected {count:4d}: {reason}")
    if profiler:
        profiler.dump_stats(args.profile)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)


if __name__ == "__main__":
    main()
