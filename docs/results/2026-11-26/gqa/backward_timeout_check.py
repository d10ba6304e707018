"""Hang or slow host? One process, no xdist: the grouped fa2 backward configurations that timed out in the first
GPU run, each through the tuner's GpuEvaluator with a 120 s timeout (a real hang still never answers), printing
how long the evaluation took and how much of it was validation; then the host's share alone (fresh inputs and
float64 references of the grouped validation cases, what a worker computes inside a candidate's first
evaluation and again after every restart).

    PYTHONPATH=. python3 docs/results/2026-11-26/gqa/backward_timeout_check.py
"""

from __future__ import annotations

import time

import numpy as np

from autotune.spaces import ALGO, get_space
from autotune.tuning.evaluation.gpu import GpuEvaluator

FAILED = [  # GPU_RUN.md
    {"BC": 128, "BR": 32, "WARPS": 8, "STAGES": 2, "DQ_ATOMIC": 1, "SWIZZLE": 0},
    {"BC": 64, "BR": 32, "WARPS": 4, "STAGES": 1, "DQ_ATOMIC": 0, "SWIZZLE": 0},
    {"BC": 128, "BR": 16, "WARPS": 4, "STAGES": 2, "DQ_ATOMIC": 1, "SWIZZLE": 0},
    {"BC": 64, "BR": 16, "WARPS": 4, "STAGES": 2, "DQ_ATOMIC": 0, "SWIZZLE": 1},
    {"BC": 128, "BR": 32, "WARPS": 8, "STAGES": 1, "DQ_ATOMIC": 1, "SWIZZLE": 0},
]

for kernel in ("attention_backward", "attention_causal_backward"):
    for d in (64, 128):
        space = get_space(kernel, dtype="float16")
        shape = (2, 8, 2, 333, 1000, d)
        rng = np.random.default_rng(1)
        t = time.perf_counter()
        for vshape, kind in space.validation_cases(shape):
            x = space.inputs(vshape, rng, kind)
            decoded = space.decoded_inputs(x, vshape)
            space.tolerances(decoded, space.reference(decoded, vshape), vshape)
        print(f"{kernel} d={d}: host data of the validation cases {time.perf_counter() - t:.2f} s", flush=True)
        configs = [{ALGO: "fa2", **c} for c in FAILED]
        with GpuEvaluator(space, shape, seed=19, min_time_ms=0.5, max_reps=3, timeout_s=120) as evaluator:
            configs = [c for c in configs if not space.violations(c, shape, evaluator.device)]
            for c, m in zip(configs, [f.result() for f in [evaluator.submit(c) for c in configs]]):
                print(f"  {space.describe(c)}: ok={m.ok} {m.failure or ''} {m.reason or ''} evaluate "
                      f"{m.evaluate_s or 0:.2f} s (validate {m.validate_s or 0:.2f} s) registers {m.registers} "
                      f"spill {m.spill_bytes}", flush=True)
