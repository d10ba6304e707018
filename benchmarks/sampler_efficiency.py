"""How fast each sampler finds the best configuration: replayed searches on a recorded, exhaustive space.

    python benchmarks/sampler_efficiency.py --recording tests/data/replay_gemm_h200.json --out $OUT/samplers
        [--warm-from OTHER_SHAPE_RECORDING.json] [--random-recording random_gemm_4096.json.gz]
        [--seeds 20] [--budgets 25,50,100,200] [--samplers tpe,random,cmaes,gp] [--jobs 8]
        [--curves-from EARLIER/samplers.json]

Each sampler searches the recorded space (`ReplayEvaluator`, no GPU) with the real driver (`Search`: rejection,
duplicates, the default measured first, in-flight proposals), ``--seeds`` times, up to the largest budget; the
best-so-far after each measured trial, as a fraction of the best known time (1.0: found it), gives every budget
from one run, since no sampler knows the budget. Warm-started variants (``<sampler>+warm``) begin with the
leaders of the same space recorded at another shape (``--warm-from``), as `autotune.tuning.warmstart` seeds them.
``--random-recording`` (from ``record_replay.py --random``): random search over the whole space, its expected
best at each budget computed exactly from the recorded distribution.

Writes ``samplers.json`` (per-seed curves), ``samplers.md`` (median fraction of best at each budget) and
``samplers.png`` (median against trials) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
import warnings
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.results import studies  # noqa: E402
from autotune.spaces import get_space  # noqa: E402
from autotune.tuning.evaluation import RecordedMeasurements, ReplayEvaluator  # noqa: E402
from autotune.tuning.samplers import make_sampler  # noqa: E402
from autotune.tuning.search import Search  # noqa: E402
from autotune.tuning.search_report import SearchSettings  # noqa: E402

WARM_SEEDS = 5


def leaders(recording: RecordedMeasurements, count: int) -> list[dict]:
    ok = sorted((m.time_ms, k) for k, m in recording.measurements.items() if m.ok and m.time_ms)
    return [recording.configs[k] for _, k in ok[:count]]


def curve(recording: RecordedMeasurements, sampler: str, seed: int, budget: int, seeds_from: list[dict]) -> list[float]:
    """Best time so far after each measured trial of one replayed search."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = get_space(recording.kernel, recording.domains)
    study = optuna.create_study(direction="minimize", sampler=make_sampler(sampler, seed))
    settings = SearchSettings(trials=budget, sampler=sampler, seed=seed, retime_top=1, retime_rounds=1,
                              refresh_s=3600, patience=2000)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = Search(space, tuple(recording.shape), ReplayEvaluator(recording), study, settings,
                        seeds=[(c, "warm") for c in seeds_from])  # fmt: skip
        search.run()
    best, out = float("inf"), []
    for t in sorted(study.trials, key=lambda t: t.number):
        if not studies.is_measured(t):
            continue
        if t.value is not None:
            best = min(best, t.value)
        out.append(best)
    return out


def random_expected_best(random_rec: RecordedMeasurements, budgets: list[int]) -> dict[int, float]:
    """Expected best time of ``b`` draws without replacement from the recorded valid configurations (failures
    count as no time), as a fraction of the best recorded: exact, from the order statistics."""
    times = sorted(m.time_ms if m.ok and m.time_ms else float("inf") for m in random_rec.measurements.values())
    n, best = len(times), times[0]
    out = {}
    for b in budgets:
        if b > n:
            continue
        # P(the minimum of b draws is times[i]) = C(n-1-i, b-1) / C(n, b)
        p, expected = b / n, 0.0
        for i, t in enumerate(times):
            if i > 0:
                p *= (n - i - b + 1) / (n - i) if n - i - b + 1 > 0 else 0.0
            if p == 0:
                break
            expected += p * (best / t)
        out[b] = expected
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", type=Path, required=True)
    parser.add_argument("--warm-from", type=Path)
    parser.add_argument("--random-recording", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budgets", default="25,50,100,200")
    parser.add_argument("--samplers", default="tpe,random,cmaes,gp")
    parser.add_argument("--jobs", type=int, default=1, help="searches run at once, one per process")
    parser.add_argument("--curves-from", type=Path, action="append", default=[],
                        help="samplers.json of an earlier run on the same recording (slow samplers run apart)")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    recording = RecordedMeasurements.load(args.recording)
    best_known = min(m.time_ms for m in recording.measurements.values() if m.ok and m.time_ms)
    valid = sum(1 for m in recording.measurements.values())
    variants = [(s, []) for s in args.samplers.split(",") if s]
    if args.warm_from:
        warm = leaders(RecordedMeasurements.load(args.warm_from), WARM_SEEDS)
        variants += [(f"{s}+warm", warm) for s in ("tpe", "random")]
    args.out.mkdir(parents=True, exist_ok=True)
    curves: dict[str, list[list[float]]] = {}
    for name, seeds_from in variants:
        sampler = name.split("+")[0]
        start = time.perf_counter()
        jobs = [(recording, sampler, seed, max(budgets), seeds_from) for seed in range(args.seeds)]
        if args.jobs > 1:  # one search per process: each is sequential, and gp and cmaes are slow
            with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
                runs = pool.starmap(curve, jobs)
        else:
            runs = [curve(*job) for job in jobs]
        curves[name] = [[best_known / t for t in run] for run in runs]
        print(f"{name}: {args.seeds} searches in {time.perf_counter() - start:.1f} s; median fraction of best "
              + ", ".join(f"{b}: {median_at(curves[name], b):.3f}" for b in budgets), flush=True)
        # Written after each variant: a long study interrupted keeps what it has.
        (args.out / "samplers.json").write_text(json.dumps({"best_known_ms": best_known, "curves": curves}))
    for earlier in args.curves_from:
        data = json.loads(earlier.read_text())
        if abs(data["best_known_ms"] - best_known) > 1e-9 * best_known:
            raise SystemExit(f"{earlier} was replayed on another recording")
        curves = {**{k: v for k, v in data["curves"].items() if k not in curves}, **curves}
    table = {name: {b: median_at(c, b) for b in budgets} for name, c in curves.items()}
    if args.random_recording:
        whole = RecordedMeasurements.load(args.random_recording)
        label = f"random, whole space ({'x'.join(map(str, whole.shape))}, {whole.device.name}; exact)"
        table[label] = random_expected_best(whole, budgets)
    (args.out / "samplers.json").write_text(json.dumps({"best_known_ms": best_known, "curves": curves}))
    lines = [f"{recording.kernel} {'x'.join(map(str, recording.shape))} on {recording.device.name}: "
             f"{valid} recorded configurations; median fraction of the best known ({best_known:.4f} ms) "
             f"reached, {args.seeds} seeds", "", "| sampler | " + " | ".join(f"{b} trials" for b in budgets) + " |",
             "|---|" + "---|" * len(budgets)]  # fmt: skip
    for name, row in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[b]:.3f}" if b in row else "-" for b in budgets) + " |")
    (args.out / "samplers.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(curves, args.out / "samplers.png", max(budgets))


def median_at(runs: list[list[float]], budget: int) -> float:
    return statistics.median(r[min(budget, len(r)) - 1] for r in runs if r)


def plot(curves: dict[str, list[list[float]]], path: Path, budget: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, runs in curves.items():
        xs = list(range(1, budget + 1))
        ax.plot(xs, [median_at(runs, x) for x in xs], label=name)
    ax.axhline(0.97, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("measured trials")
    ax.set_ylabel("median fraction of the best known")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
