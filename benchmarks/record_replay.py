"""Measure every valid configuration of a narrowed gemm space on this GPU and save a replay recording.

    python benchmarks/record_replay.py --out tests/data/replay_gemm_<device>.json
    python benchmarks/record_replay.py --random 3000 --shape 4096x4096x4096 --out $OUT/random_gemm_4096.json.gz

The exhaustive recording is what the CPU tests replay to check the search driver and the samplers on real
numbers (`benchmarks/sampler_efficiency.py` replays it). ``--random N`` instead measures N distinct random valid
configurations of the whole (un-narrowed) space: the distribution of what random search meets, from which the
sampler study computes random search's expected best at each budget exactly (order statistics); it is not
replayable by a sampler, since most of the space is unrecorded. A ``.gz`` name is written compressed.

``--deadline-s`` stops waiting for results after that long and saves what was measured (a device command has a
time limit); ``--append`` loads ``--out`` first and measures only configurations it lacks, so a large random
recording can be made over several commands (same ``--seed``: the same draws, in the same order).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import random
import time
from pathlib import Path

from autotune.spaces import config_key, get_space
from autotune.spaces.enumeration import random_config, valid_configs
from autotune.tuning.evaluation import RecordedMeasurements
from autotune.tuning.evaluation.gpu import GpuEvaluator

DOMAINS = {
    "ALGO": ["simt"],
    "BM": [64, 128],
    "BN": [64, 128],
    "BK": [8, 16],
    "WARPS_M": [1, 2],
    "WARPS_N": [2, 4],
    "TM": [4, 8],
    "TN": [4],
    "WNITER": [1, 2],
    "VEC": [4],
    "A_TRANS": [0, 1],
    "A_PAD": [4],
    "PIPELINE": ["double", "cp.async-3"],
    "GROUP_M": [1],
    "MIN_BLOCKS": [1],
}


def random_valid(space, shape, device, count: int, seed: int) -> list:
    """``count`` distinct valid configurations drawn uniformly per parameter (invalid draws are redrawn)."""
    rng = random.Random(seed)
    found: dict[str, dict] = {}
    for _ in range(10_000 * count):
        config = random_config(space, rng)
        if not space.violations(config, shape, device):
            found.setdefault(config_key(config), config)
            if len(found) == count:
                break
    return list(found.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shape", default="1024x1024x1024")
    parser.add_argument("--random", type=int, default=0, help="N random valid configurations of the whole space")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-time-ms", type=float, default=25.0, help="kernel time per timed measurement")
    parser.add_argument("--deadline-s", type=float, default=None, help="save what was measured after this long")
    parser.add_argument("--append", action="store_true", help="add to the recording at --out")
    args = parser.parse_args()
    space = get_space("gemm", None if args.random else DOMAINS)
    domains = {p.name: list(p.values) for p in space.params}  # what was searched, parameters added later included
    shape = space.parse_shape(args.shape)
    start = time.perf_counter()
    with GpuEvaluator(space, shape, seed=0, min_time_ms=args.min_time_ms) as evaluator:
        if args.random:
            configs = random_valid(space, shape, evaluator.device, args.random, args.seed)
        else:
            configs = valid_configs(space, shape, evaluator.device)
        if args.append and args.out.exists():
            recording = RecordedMeasurements.load(args.out)
            if recording.template_hash != space.template_hash() or tuple(recording.shape) != tuple(shape):
                raise SystemExit(f"{args.out} was recorded with another template or shape: not appending")
        else:
            recording = RecordedMeasurements(kernel="gemm", shape=shape, device=evaluator.device,
                                             toolchain=evaluator.toolchain, template_hash=space.template_hash(),
                                             domains=domains, dtype=space.dtype)  # fmt: skip
        configs = [c for c in configs if config_key(c) not in recording.configs]
        # A bounded window in flight: at the deadline little is left queued for the GPU worker to finish first.
        window = 4 * (evaluator.compiler.jobs or 1)
        futures = [evaluator.submit(c) for c in configs[:window]]
        added = 0
        for i, config in enumerate(configs):
            left = None if args.deadline_s is None else args.deadline_s - (time.perf_counter() - start)
            try:
                recording.add(config, futures[i].result(timeout=max(left, 0.0) if left is not None else None))
            except concurrent.futures.TimeoutError:
                break
            added += 1
            if i + window < len(configs):
                futures.append(evaluator.submit(configs[i + window]))
    recording.save(args.out)
    outcomes = collections.Counter(m.failure or "ok" for m in recording.measurements.values())
    best = min((m.time_ms for m in recording.measurements.values() if m.ok), default=None)
    print(f"recorded {added} configurations ({len(recording.configs)} in the file) on {evaluator.device.name} in "
          f"{time.perf_counter() - start:.1f} s: {dict(outcomes)}; fastest {best:.4f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
