"""Grouped-query attention backward (Llama's 32 query heads over 8 kv heads, head_dim 128; 2026-11-29f's fa3 for
grouped heads, not yet run on a GPU): fa3 (each head_dim's default, dQ over the block's keys, and dQ by atomics)
against fa2 (the rule default for grouped heads), validated and timed by autotune's GPU worker (L2 flushed),
against SDPA's backward with ``enable_gqa=True`` in the same process (`torch.autograd.grad` of each backend's own
forward; the fastest is named).

    python gqa_bwd_probe.py [--reps 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from _timing import interleaved_medians  # noqa: E402

SHAPES = [(1, 32, 8, 4096, 4096, 128), (4, 32, 8, 2048, 2048, 128), (2, 32, 8, 4096, 4096, 64)]
KERNELS = ("attention_backward", "attention_causal_backward")


def variants(space, shape, device) -> dict:  # noqa: ANN001 (2026-11-29g's order_probe.py gives its own)
    from autotune.spaces import ALGO

    fa3 = {ALGO: "fa3", **space.algos["fa3"].default_for(shape[-1])}
    return {"fa3 default": fa3, "fa3 atomic": {**fa3, "DQ_MODE": 0},
            "fa2 (rule default)": space.rule_default(shape, device)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from autotune.device import query_device
    from autotune.spaces import get_space
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    for kernel in KERNELS:
        for shape in SHAPES:
            space = get_space(kernel, dtype="bfloat16")
            b, h, hkv, sq, skv, d = shape
            q, do = (torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            k, v = (torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            vendors = {}
            for name in ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"):
                leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
                try:
                    with sdpa_kernel(getattr(SDPBackend, name)):
                        out = sdpa(*leaves, is_causal="causal" in kernel, enable_gqa=True)
                        torch.autograd.grad(out, leaves, do, retain_graph=True)
                except RuntimeError:
                    continue

                def run(out=out, leaves=leaves, backend=getattr(SDPBackend, name)):
                    with sdpa_kernel(backend):
                        torch.autograd.grad(out, leaves, do, retain_graph=True)

                vendors[name] = run
            medians = interleaved_medians(vendors, args.reps, flush, torch)
            fastest = min(medians, key=medians.get)
            work = space.work(shape) / 1e12
            print(f"\n{kernel} bf16 {space.format_shape(shape)} on {device.name}: "
                  + ", ".join(f"{n} {t * 1e3:.0f} us" for n, t in medians.items())
                  + f"; fastest {fastest} ({work / (medians[fastest] * 1e-3):.0f} TFLOP/s)", flush=True)  # fmt: skip
            configs = variants(space, shape, device)
            configs = {n: c for n, c in configs.items() if not space.violations(c, shape, device)}
            with GpuEvaluator(space, shape, seed=0, min_time_ms=50.0, max_reps=args.reps) as evaluator:
                results = {n: f.result() for n, f in {n: evaluator.submit(c) for n, c in configs.items()}.items()}
            for name, r in results.items():
                if r.ok:
                    print(f"  {name:>18}: {r.time_ms * 1e3:7.0f} us  {medians[fastest] / r.time_ms:5.2f}x {fastest}  "
                          f"{work / (r.time_ms * 1e-3):.0f} TFLOP/s  {space.describe(configs[name])}", flush=True)
                else:
                    print(f"  {name:>18}: {r.failure} {r.reason}", flush=True)


if __name__ == "__main__":
    main()
