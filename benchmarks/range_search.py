"""A range of shapes in one search against each bucket's own search (issue 23's range row).

    python benchmarks/range_search.py [--range 1-8192x4096x4096] [--dtype float32] [--range-trials 600]
        [--own-trials 200] [--buckets 1 64 8192] [--seed 0] [--work /tmp/range-bench] [--out FILE.json]

1. ``autotune search gemm --shape RANGE --trials RANGE_TRIALS`` (the trials split over the buckets, each bucket a
   study warm-started from the buckets before it), cold: a fresh compile cache and database, timed as process wall.
2. For each bucket (or those of ``--buckets``): ``autotune search gemm --shape BUCKET --trials OWN_TRIALS``, cold too,
   each with its own fresh compile cache and database.
3. Both winners of each bucket re-timed side by side in one GPU worker (validated again, L2 flushed, interleaved
   rounds, medians), so that the ratio does not carry two processes' run-to-run spread.

Prints per bucket the two winners and their ratio (own time / range time: ≥ 0.95 is the target), and the range's
wall against the mean own wall (≤ 3 is the target). Step 1 is skipped where ``--work`` already holds its result,
and step 2 for buckets already searched, so a run cut at a machine's time limit goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

KERNEL = "gemm"


def search(shape: str, dtype: str, trials: int, seed: int, folder: Path) -> float:
    """Process wall seconds of one cold `autotune search` into ``folder`` (its own cache and database)."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "autotune", "search", KERNEL, "--shape", shape, "--dtype", dtype,
           "--trials", str(trials), "--seed", str(seed), "--db", str(folder / "tuned.db")]  # fmt: skip
    env = {**os.environ, "AUTOTUNE_CACHE_DIR": str(folder / "cache")}
    began = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    (folder / "search.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"autotune search {shape} failed (exit {done.returncode}): {tail[0]}")
    (folder / "wall.json").write_text(json.dumps({"wall_s": wall}))
    return wall


def searched(folder: Path, shape: str, dtype: str, trials: int, seed: int) -> float:
    wall = folder / "wall.json"
    if wall.is_file():
        return json.loads(wall.read_text())["wall_s"]
    return search(shape, dtype, trials, seed, folder)


def winners(db: Path, dtype: str, device_name: str) -> dict[str, dict]:
    """Stored best configuration of each shape of ``db`` on this GPU: shape text → {config, time_ms}."""
    from autotune.results.storage import Database

    store = Database(f"sqlite:///{db}", create=False)
    try:
        return {r.shape: {"config": r.config, "time_ms": r.time_ms}
                for r in store.best(KERNEL, device_name, dtype=dtype)}  # fmt: skip
    finally:
        store.close()


def retime(space, shape: tuple, configs: dict[str, dict], rounds: int) -> dict[str, float]:  # noqa: ANN001
    """Median ms of each configuration over ``rounds`` interleaved measurements in one GPU worker."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    times: dict[str, list[float]] = {name: [] for name in configs}
    with GpuEvaluator(space, shape, seed=0, racing=False) as evaluator:
        for _ in range(rounds):
            for name, config in configs.items():
                result = evaluator.submit(config).result()
                if not result.ok:
                    raise SystemExit(f"{name} winner at {shape} failed on re-timing: {result.failure} {result.reason}")
                times[name].append(result.time_ms)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--range", default="1-8192x4096x4096", dest="shape_range")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--range-trials", type=int, default=600, help="trials of the range, split over its buckets")
    parser.add_argument("--own-trials", type=int, default=200, help="trials of each bucket's own search")
    parser.add_argument("--buckets", type=int, nargs="+", default=None, help="the ranged dimension's values to "
                        "compare (default: every bucket)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved re-timings of each winner")
    parser.add_argument("--work", type=Path, default=Path("/tmp/range-bench"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from autotune.device import query_device
    from autotune.shape import expand_range, format_shape
    from autotune.spaces import get_space

    space = get_space(KERNEL, dtype=args.dtype)
    device = query_device()
    buckets = expand_range(args.shape_range, space.dims)
    if args.buckets:
        ranged = [i for i, part in enumerate(args.shape_range.split("x")) if "-" in part]
        buckets = [b for b in buckets if any(b[i] in args.buckets for i in ranged)]
    range_wall = searched(args.work / "range", args.shape_range, args.dtype, args.range_trials, args.seed)
    print(f"{KERNEL} {args.dtype} {args.shape_range} on {device.name}: range search {range_wall:.1f} s "
          f"({args.range_trials} trials)", flush=True)  # fmt: skip
    from_range = winners(args.work / "range" / "tuned.db", args.dtype, device.name)
    rows = []
    for bucket in buckets:
        text = format_shape(bucket)
        folder = args.work / f"own-{text}"
        own_wall = searched(folder, text, args.dtype, args.own_trials, args.seed)
        own = winners(folder / "tuned.db", args.dtype, device.name).get(text)
        ranged = from_range.get(text)
        if own is None or ranged is None:
            print(f"  {text}: no stored winner ({'own' if own is None else 'range'} search)", flush=True)
            continue
        timed = retime(space, bucket, {"range": ranged["config"], "own": own["config"]}, args.rounds)
        row = {"shape": text, "range_ms": timed["range"], "own_ms": timed["own"],
               "ratio": timed["own"] / timed["range"], "own_wall_s": own_wall,
               "range_config": space.describe(ranged["config"]),
               "own_config": space.describe(own["config"])}  # fmt: skip
        rows.append(row)
        print(f"  {text:>16}: range {row['range_ms']:.4f} ms, own {row['own_ms']:.4f} ms = {row['ratio']:.3f} "
              f"(own search {own_wall:.1f} s)  range: {row['range_config']}  own: {row['own_config']}", flush=True)
    if rows:
        mean_own = statistics.mean(r["own_wall_s"] for r in rows)
        print(f"worst bucket {min(r['ratio'] for r in rows):.3f} (target ≥ 0.95); range wall {range_wall:.1f} s = "
              f"{range_wall / mean_own:.2f}x the mean own search ({mean_own:.1f} s; target ≤ 3)")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps({"device": device.name, "range": args.shape_range, "dtype": args.dtype,
                                        "range_trials": args.range_trials, "own_trials": args.own_trials,
                                        "range_wall_s": range_wall, "buckets": rows}, indent=1))  # fmt: skip


if __name__ == "__main__":
    from autotune.errors import AutotuneError

    try:
        main()
    except AutotuneError as exc:  # no GPU, a bad shape: one line
        raise SystemExit(f"range_search: {exc}") from None
