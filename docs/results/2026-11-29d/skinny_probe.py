"""Llama's decoding GEMMs at a few rows: the rule default and a few wgmma_skinny configurations (validated and timed
by autotune's GPU worker, L2 flushed) against torch's own path in the same process (cuBLAS through F.linear; for
linear_swiglu, F.linear of the fused gate_up weight, then chunk, silu and the product, as the eager block runs it).

    python skinny_probe.py [--rows 16] [--reps 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from _timing import interleaved_medians  # noqa: E402

CASES = [("gemm_nt", 6144, 4096), ("gemm_nt", 4096, 4096), ("linear_swiglu", 14336, 4096), ("gemm_nt", 4096, 14336)]
VARIANTS = {
    f"{bn} s{stages} split{split}": {"BN": bn, "STAGES": stages, "SPLIT_K": split}
    for bn, stages, split in ((128, 6, 1), (128, 6, 2), (128, 8, 4), (64, 8, 2), (64, 8, 4), (64, 6, 1), (128, 3, 1),
                              (128, 3, 2), (64, 4, 2))
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[16])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    from autotune.device import query_device
    from autotune.spaces import ALGO, get_space
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    for m in args.rows:
        for family, n, k in CASES:
            space = get_space(family, dtype="bfloat16")
            shape = (m, n, k)
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            if family == "linear_swiglu":
                w = torch.randn(2 * n, k, device="cuda", dtype=torch.bfloat16) / k**0.5

                def vendor():
                    gate, up = F.linear(x, w).chunk(2, dim=-1)
                    return F.silu(gate) * up
            else:
                w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5

                def vendor():
                    return F.linear(x, w)

            torch_ms = interleaved_medians({"torch": vendor}, args.reps, flush, torch)["torch"]
            weight_gb = w.numel() * 2 / 1e9
            print(f"\n{family} {m}x{n}x{k} bf16 on {device.name}: torch {torch_ms * 1e3:.1f} us "
                  f"({weight_gb / torch_ms * 1e3:.2f} GB/s of weight)")  # fmt: skip
            rule = space.rule_default(shape, device)
            base = {ALGO: "wgmma_skinny", **space.algos["wgmma_skinny"].default_config}
            configs = {"rule default": rule, **{name: {**base, **v} for name, v in VARIANTS.items()}}
            configs = {name: c for name, c in configs.items() if not space.violations(c, shape, device)}
            with GpuEvaluator(space, shape, seed=0, min_time_ms=50.0, max_reps=args.reps) as evaluator:
                results = {name: f.result() for name, f in {n: evaluator.submit(c) for n, c in configs.items()}.items()}
            for name, r in results.items():
                if r.ok:
                    print(f"  {name:>16}: {r.time_ms * 1e3:6.1f} us  {torch_ms / r.time_ms:5.2f}x torch  "
                          f"{weight_gb / r.time_ms * 1e3:.0f} GB/s  {space.describe(configs[name])}")  # fmt: skip
                else:
                    print(f"  {name:>16}: {r.failure} {r.reason}")


if __name__ == "__main__":
    main()
