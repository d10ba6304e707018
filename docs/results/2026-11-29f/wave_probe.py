"""Short K (≤ 3072) where the cooperative 128×256 tile makes one nearly full wave: the new rule default (that tile)
against the ping-pong tile the short-K rule took before, validated and timed by autotune's GPU worker (L2 flushed),
against cuBLAS through torch in the same process (``a @ b`` for gemm, ``F.linear`` with a bias for linear).

    python wave_probe.py [--reps 30]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from _timing import interleaved_medians  # noqa: E402

CASES = [("gemm", 2048, 2048, 2048), ("gemm", 2000, 2000, 2000), ("gemm", 2048, 2048, 768),
         ("gemm", 2048, 2048, 3072), ("gemm", 1536, 2816, 2048), ("gemm", 2048, 2048, 1024),
         ("linear", 2048, 2048, 2048), ("linear", 2048, 2048, 768)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    from autotune.device import query_device
    from autotune.spaces import _gemm_rules, get_space
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    for family, m, n, k in CASES:
        space = get_space(family, dtype="bfloat16")
        shape = (m, n, k)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        if family == "gemm":
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / k**0.5

            def vendor():
                return a @ b
        else:
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
            bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)

            def vendor():
                return F.linear(a, w, bias)

        torch_ms = interleaved_medians({"torch": vendor}, args.reps, flush, torch)["torch"]
        tflops = 2 * m * n * k / 1e9
        print(f"\n{family} {m}x{n}x{k} bf16 on {device.name}: cuBLAS {torch_ms * 1e3:.1f} us "
              f"({tflops / torch_ms:.0f} TFLOP/s)", flush=True)  # fmt: skip
        before = _gemm_rules._tma_tile_rule(space, "wgmma_tma", _gemm_rules.SHORT_K_TILES, shape, device,
                                            _gemm_rules.SHORT_K_SCHEDULE, split=False)  # fmt: skip
        configs = {"rule default": space.rule_default(shape, device), "ping-pong (before)": before}
        configs = {name: c for name, c in configs.items() if c is not None and not space.violations(c, shape, device)}
        with GpuEvaluator(space, shape, seed=0, min_time_ms=50.0, max_reps=args.reps) as evaluator:
            results = {name: f.result() for name, f in {n: evaluator.submit(c) for n, c in configs.items()}.items()}
        for name, r in results.items():
            if r.ok:
                print(f"  {name:>18}: {r.time_ms * 1e3:6.1f} us  {torch_ms / r.time_ms:5.2f}x cuBLAS  "
                      f"{tflops / r.time_ms:.0f} TFLOP/s  {space.describe(configs[name])}", flush=True)  # fmt: skip
            else:
                print(f"  {name:>18}: {r.failure} {r.reason}", flush=True)


if __name__ == "__main__":
    main()
