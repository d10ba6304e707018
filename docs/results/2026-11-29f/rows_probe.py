"""GEMM of one row (dX at decoding) and of 64 to 256 rows (issue 19's 127×4096², a serving batch's projections),
after 2026-11-29f's rule change (wgmma_skinny to 128 rows, and for one row of a B stored K×N): the rule default against wgmma_skinny's 8-row tiles (one row), its 128-row tiles (the
weight streamed once per 128 rows, K split over a cluster) and its 64-row ones, validated and timed by autotune's GPU
worker (L2 flushed), against cuBLAS through torch in the same process (``x @ w`` for gemm, B stored K×N;
``F.linear`` for gemm_nt).

    python rows_probe.py [--reps 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from _timing import interleaved_medians  # noqa: E402

CASES = [("gemm", 1, 4096, 4096), ("gemm", 1, 4096, 14336), ("gemm_nt", 1, 4096, 4096), ("gemm_nt", 1, 14336, 4096),
         ("gemm_nt", 100, 4096, 4096), ("gemm", 127, 4096, 4096), ("gemm_nt", 64, 4096, 4096),
         ("gemm_nt", 128, 4096, 4096), ("gemm_nt", 200, 4096, 4096), ("gemm_nt", 256, 4096, 4096),
         ("gemm_nt", 128, 4096, 14336), ("gemm_nt", 128, 28672, 4096)]
VARIANTS = {
    f"bm{bm} bn{bn} wg{wg} s{stages} split{split}": {"BM": bm, "BN": bn, "WG": wg, "STAGES": stages,
                                                     "SPLIT_K": split}
    for bm, bn, wg, stages, split in ((128, 64, 1, 6, 1), (128, 64, 1, 6, 2), (128, 64, 1, 6, 4), (128, 128, 1, 5, 1),
                                      (128, 128, 1, 5, 2), (128, 128, 2, 5, 2), (128, 256, 2, 2, 2), (64, 64, 1, 8, 2),
                                      (64, 128, 1, 6, 2), (128, 64, 1, 8, 2), (128, 128, 1, 3, 1))
}
# One row (dX of a decoding step, the gemm layout: B stored K×N), where the rule runs gemv today: 8-row tiles.
ONE_ROW = {f"bm8 bn{bn} s{stages} split{split}": {"BM": 8, "BN": bn, "WG": 1, "STAGES": stages, "SPLIT_K": split}
           for bn, stages, split in ((64, 8, 1), (64, 8, 2), (128, 6, 1), (128, 6, 2), (64, 6, 4))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    from autotune.device import query_device
    from autotune.spaces import ALGO, get_space
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    for family, m, n, k in CASES:
        space = get_space(family, dtype="bfloat16")
        shape = (m, n, k)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        if family == "gemm":
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / k**0.5

            def vendor():
                return x @ w
        else:
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5

            def vendor():
                return F.linear(x, w)

        torch_ms = interleaved_medians({"torch": vendor}, args.reps, flush, torch)["torch"]
        tflops = 2 * m * n * k / 1e9
        print(f"\n{family} {m}x{n}x{k} bf16 on {device.name}: cuBLAS {torch_ms * 1e3:.1f} us "
              f"({tflops / torch_ms:.0f} TFLOP/s)", flush=True)  # fmt: skip
        rule = space.rule_default(shape, device)
        base = {ALGO: "wgmma_skinny", **space.algos["wgmma_skinny"].default_config}
        variants = ONE_ROW if m == 1 else VARIANTS
        configs = {"rule default": rule, **{name: {**base, **v} for name, v in variants.items()}}
        configs = {name: c for name, c in configs.items() if not space.violations(c, shape, device)}
        with GpuEvaluator(space, shape, seed=0, min_time_ms=50.0, max_reps=args.reps) as evaluator:
            results = {name: f.result() for name, f in {n: evaluator.submit(c) for n, c in configs.items()}.items()}
        for name, r in results.items():
            if r.ok:
                print(f"  {name:>28}: {r.time_ms * 1e3:6.1f} us  {torch_ms / r.time_ms:5.2f}x cuBLAS  "
                      f"{tflops / r.time_ms:.0f} TFLOP/s  {space.describe(configs[name])}", flush=True)  # fmt: skip
            else:
                print(f"  {name:>28}: {r.failure} {r.reason}", flush=True)


if __name__ == "__main__":
    main()
