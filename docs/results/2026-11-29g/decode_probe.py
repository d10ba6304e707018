"""(2026-11-29g: combine_probe.py of 2026-11-29f with more variants and shapes.)
Decoding with grouped-query attention at batch 1 and 16 (Llama: 32 query heads over 8 kv heads, head_dim 128,
bf16), where split_kv waits on its second launch (issue 20's decoding row): the rule default (splits combined by
attention_combine) against the splits combined in their cluster (COMBINE=1, 2026-11-29f, not yet run on a GPU),
validated and timed by autotune's GPU worker (L2 flushed), against SDPA's fastest backend with enable_gqa in the
same process.

    python combine_probe.py [--reps 30]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from _timing import interleaved_medians  # noqa: E402

SHAPES = [(1, 32, 8, 1, 8192, 128), (1, 32, 8, 1, 32768, 128), (1, 32, 8, 1, 131072, 128),
          (16, 32, 8, 1, 8192, 128), (16, 32, 8, 1, 32768, 128), (64, 32, 8, 1, 8192, 128)]
# The cluster combine at 2 to 16 splits (16: the non-portable cluster size, 2026-11-29g), deeper rings, fewer warps;
# 16 and 32 splits through the combine kernel for reference.
VARIANTS = {f"cluster s{s} w{w} st{st}": {"SPLITS": s, "WARPS": w, "STAGES": st, "COMBINE": 1}
            for s, w, st in ((16, 4, 2), (16, 4, 3), (16, 2, 2), (16, 2, 3), (8, 4, 2), (8, 4, 3), (8, 2, 3),
                             (4, 4, 2), (2, 4, 2), (2, 4, 3))}
VARIANTS.update({f"kernel s{s} w4": {"SPLITS": s, "COMBINE": 0} for s in (8, 16, 32)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from autotune.device import query_device
    from autotune.spaces import ALGO, get_space
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    space = get_space("attention", dtype="bfloat16")
    for shape in SHAPES:
        b, h, hkv, sq, skv, d = shape
        q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        vendors = {}
        for name in ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"):
            try:
                with sdpa_kernel(getattr(SDPBackend, name)):
                    sdpa(q, k, v, enable_gqa=True)
            except RuntimeError:
                continue

            def run(backend=getattr(SDPBackend, name)):
                with sdpa_kernel(backend):
                    sdpa(q, k, v, enable_gqa=True)

            vendors[name] = run
        medians = interleaved_medians(vendors, args.reps, flush, torch)
        fastest = min(medians, key=medians.get)
        print(f"\nattention bf16 {space.format_shape(shape)} on {device.name}: "
              + ", ".join(f"{n} {t * 1e3:.1f} us" for n, t in medians.items()) + f"; fastest {fastest}", flush=True)
        rule = space.rule_default(shape, device)
        configs = {"rule default": rule, **{n: {**rule, **v} for n, v in VARIANTS.items()}}
        configs = {n: c for n, c in configs.items() if c[ALGO] == "split_kv" and not space.violations(c, shape, device)}
        with GpuEvaluator(space, shape, seed=0, min_time_ms=50.0, max_reps=args.reps) as evaluator:
            results = {n: f.result() for n, f in {n: evaluator.submit(c) for n, c in configs.items()}.items()}
        kv_bytes = 2 * b * hkv * skv * d * 2
        for name, r in results.items():
            if r.ok:
                print(f"  {name:>16}: {r.time_ms * 1e3:7.1f} us  {medians[fastest] / r.time_ms:5.2f}x {fastest}  "
                      f"{kv_bytes / (r.time_ms * 1e-3) / 1e9:.0f} GB/s KV  {space.describe(configs[name])}", flush=True)
            else:
                print(f"  {name:>16}: {r.failure} {r.reason}", flush=True)


if __name__ == "__main__":
    main()
