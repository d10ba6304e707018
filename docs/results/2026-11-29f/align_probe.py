"""Why 1000³ bf16 takes 14 µs where 1024³ takes 9.4 at the same tile count (issue 19): the rule default at 1000³
and with A's rows (K), B's rows (N) or both padded to 1024 elements (128-byte aligned rows), and wgmma_tma's
largest tiles, validated and timed by autotune's GPU worker (L2 flushed), against cuBLAS (``a @ b``) per shape in
the same process.

    python align_probe.py [--reps 30]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from _timing import interleaved_medians  # noqa: E402

SHAPES = [(1000, 1000, 1000), (1000, 1000, 1024), (1000, 1024, 1000), (1000, 1024, 1024), (1024, 1024, 1024),
          (2000, 2000, 2000), (2000, 2048, 2048), (4000, 4000, 4000), (4000, 4096, 4096)]
TILES = {"64x128 coop": {"BM": 64, "BN": 128, "WG": 1}, "128x128 coop": {"BM": 128, "BN": 128, "WG": 2},
         "128x256 coop": {"BM": 128, "BN": 256, "WG": 2}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    import torch

    from autotune.device import query_device
    from autotune.spaces import ALGO, get_space
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    space = get_space("gemm", dtype="bfloat16")
    base = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config}
    for shape in SHAPES:
        m, n, k = shape
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / k**0.5
        torch_ms = interleaved_medians({"torch": lambda: a @ b}, args.reps, flush, torch)["torch"]
        tflops = 2 * m * n * k / 1e9
        print(f"\ngemm {m}x{n}x{k} bf16 on {device.name}: cuBLAS {torch_ms * 1e3:.1f} us "
              f"({tflops / torch_ms:.0f} TFLOP/s)", flush=True)  # fmt: skip
        configs = {"rule default": space.rule_default(shape, device)}
        configs.update({name: {**base, **tile} for name, tile in TILES.items()})
        configs = {name: c for name, c in configs.items() if not space.violations(c, shape, device)}
        with GpuEvaluator(space, shape, seed=0, min_time_ms=50.0, max_reps=args.reps) as evaluator:
            results = {name: f.result() for name, f in {n: evaluator.submit(c) for n, c in configs.items()}.items()}
        for name, r in results.items():
            if r.ok:
                print(f"  {name:>14}: {r.time_ms * 1e3:6.1f} us  {torch_ms / r.time_ms:5.2f}x cuBLAS  "
                      f"{tflops / r.time_ms:.0f} TFLOP/s  {space.describe(configs[name])}", flush=True)  # fmt: skip
            else:
                print(f"  {name:>14}: {r.failure} {r.reason}", flush=True)


if __name__ == "__main__":
    main()
