"""The product's Compiler with and without ``batch`` (issue 23, item 1), on the development CPU: N random valid
configurations submitted at once, as a search's proposals arrive, each Compiler with a cold cache of its own.

    python docs/results/2026-11-28b/compiler_batch_bench.py --dtype bfloat16 --algo wgmma_tma --count 24 --jobs 2
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="gemm")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--algo", default="wgmma_tma")
    parser.add_argument("--count", type=int, default=24)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    args = parser.parse_args()

    from conftest import H200

    from autotune.runtime.compiler import Compiler
    from autotune.spaces import ALGO, config_key, get_space
    from autotune.spaces.enumeration import random_config

    space = get_space(args.kernel, {ALGO: [args.algo]}, dtype=args.dtype)
    shape, rng, picked = space.default_shape, random.Random(5), {}
    while len(picked) < args.count:
        c = random_config(space, rng)
        if not space.violations(c, shape, H200):
            picked[config_key(c)] = c
    jobs = [(space.template_for(c), space.compile_defines(c, shape), space.tunable_names(c)) for c in picked.values()]
    for batch in args.batches:
        with tempfile.TemporaryDirectory() as cache:
            compiler = Compiler("sm_90a", cache_dir=Path(cache), jobs=args.jobs, batch=batch)
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            results = [f.result() for f in [compiler.submit(t, d, v) for t, d, v in jobs]]
            wall = time.perf_counter() - t0
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            compiler.close()
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        print(f"{args.kernel} {args.dtype} {args.algo}: batch {batch}, {args.jobs} threads, {len(jobs)} configurations:"
              f" {cpu / len(jobs):.3f} CPU-s each, wall {wall:.1f} s, ok {sum(r.ok for r in results)}")  # fmt: skip


if __name__ == "__main__":
    main()
