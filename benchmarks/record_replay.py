"""Measure every valid configuration of a narrowed gemm space on this GPU and save a replay recording.

    python benchmarks/record_replay.py --out tests/data/replay_gemm_<device>.json

The recording is what the CPU tests replay to check the search driver and the samplers on real numbers.
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

from autotune.evaluation import Recording
from autotune.evaluation.gpu import GpuEvaluator
from autotune.spaces import get_space

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shape", default="1024x1024x1024")
    args = parser.parse_args()
    space = get_space("gemm", DOMAINS)
    shape = space.parse_shape(args.shape)
    start = time.perf_counter()
    with GpuEvaluator(space, shape, seed=0) as evaluator:
        configs = space.valid_configs(shape, evaluator.device)
        futures = [evaluator.submit(c) for c in configs]
        recording = Recording(
            kernel="gemm",
            shape=shape,
            device=evaluator.device,
            toolchain=evaluator.toolchain,
            template_hash=space.template_hash(),
            domains=DOMAINS,
        )
        for config, future in zip(configs, futures):
            recording.add(config, future.result())
    recording.save(args.out)
    outcomes = collections.Counter(m.failure or "ok" for m in recording.measurements.values())
    best = min((m.time_ms for m in recording.measurements.values() if m.ok), default=None)
    print(f"recorded {len(configs)} configurations on {evaluator.device.name} in {time.perf_counter() - start:.1f} s:"
          f" {dict(outcomes)}; fastest {best:.4f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
