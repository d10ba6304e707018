"""A GEMM algorithm's default and a few hand-picked configurations, measured without a search (validated and timed
by autotune's GPU worker, L2 flushed), next to cuBLAS through torch (its own L2-flushed median): a quick check of
what a template reaches before tuning, and of the default configuration's standing.

    python benchmarks/gemm_configs.py --algo wgmma_tma [--dtypes float16 bfloat16] [--shapes 4096x4096x4096 ...]
        [--family gemm_nt | linear] [--only pingpong 192]

``--family``: the same configurations in another layout (gemm_nt: B stored N×K; gemm_tn: A stored K×M; linear: B
stored N×K plus a bias), against cuBLAS on the same layout (``a @ b.T``, ``a.T @ b``, ``F.linear``).
``--only``: the variants whose name holds every word.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from _timing import interleaved_medians

# Per algorithm: name → change to its default configuration.
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {}
VARIANTS["wgmma_tma"] = {
    "default (128x256 coop s4 g8)": {},
    "128x256 coop g16": {"GROUP_M": 16},
    "128x256 coop g16 cluster2": {"GROUP_M": 16, "CLUSTER_M": 2},
    "128x256 coop g8 cluster2": {"CLUSTER_M": 2},
    "256x128 coop g16": {"BM": 256, "BN": 128, "GROUP_M": 16},
    "256x128 coop g16 cluster2": {"BM": 256, "BN": 128, "GROUP_M": 16, "CLUSTER_M": 2},
    "pingpong 128x128 s6 g16": {"PINGPONG": 1, "BN": 128, "STAGES": 6, "GROUP_M": 16},
    "pingpong 128x128 s6 g16 cluster2": {"PINGPONG": 1, "BN": 128, "STAGES": 6, "GROUP_M": 16, "CLUSTER_M": 2},
    "pingpong 64x256 s5 g16": {"PINGPONG": 1, "BM": 64, "STAGES": 5, "GROUP_M": 16},
    "pingpong 64x256 s5 g16 cluster2": {"PINGPONG": 1, "BM": 64, "STAGES": 5, "GROUP_M": 16, "CLUSTER_M": 2},
    "1 consumer 128x128 s6 cluster2": {"WG": 1, "BN": 128, "STAGES": 6, "CLUSTER_M": 2},
    # Tiles with a 192 side (2026-11-28: the last wave's fill at 8192×768×K; 192 accumulators per consumer)
    "128x192 coop s5": {"BN": 192, "STAGES": 5},
    "128x192 coop s5 cluster2": {"BN": 192, "STAGES": 5, "CLUSTER_M": 2},
    "pingpong 128x192 s5": {"PINGPONG": 1, "BN": 192, "STAGES": 5},
    "pingpong 128x192 s5 g16": {"PINGPONG": 1, "BN": 192, "STAGES": 5, "GROUP_M": 16},
    "pingpong 128x192 s5 cluster2": {"PINGPONG": 1, "BN": 192, "STAGES": 5, "CLUSTER_M": 2},
    "256x192 coop s4 cluster2": {"BM": 256, "BN": 192, "CLUSTER_M": 2},
}
# Stream-K at shapes with fewer output tiles than SMs (a weight gradient: --family gemm_tn)
VARIANTS["wgmma_tma_streamk"] = {
    "default (pingpong 128x128 s7 g1)": {},
    "pingpong 128x128 s6 g8": {"STAGES": 6, "GROUP_M": 8},
    "pingpong 128x192 s5": {"BN": 192, "STAGES": 5},
    "128x256 coop s4": {"PINGPONG": 0, "BN": 256, "STAGES": 4},
    "128x192 coop s5": {"PINGPONG": 0, "BN": 192, "STAGES": 5},
    "128x128 coop s6": {"PINGPONG": 0, "STAGES": 6},
    "256x128 coop s4": {"PINGPONG": 0, "BM": 256, "STAGES": 4},
}
# The LONG_K rule's split-K tile beside it: --algo wgmma_tma --only split4
VARIANTS["wgmma_tma"]["pingpong 128x128 s7 g1 split4"] = {"PINGPONG": 1, "BN": 128, "STAGES": 7, "GROUP_M": 1,
                                                          "SPLIT_K": 4}
# Split-K at shapes with fewer output tiles than SMs: --algo wgmma_tma_split
VARIANTS["wgmma_tma_split"] = {
    f"{name} split{s}": {**change, "SPLIT_K": s}
    for name, change in (("128x128 coop s6", {"BN": 128, "STAGES": 6}), ("128x256 coop", {}),
                         ("64x128 1wg s7", {"BM": 64, "BN": 128, "WG": 1, "STAGES": 7}),
                         ("64x256 pingpong s5", {"BM": 64, "PINGPONG": 1, "STAGES": 5}))
    for s in (1, 2, 4, 8)
}
# Rows TMA cannot stride (N or K not a multiple of 8): the padding copy, then the TMA tiles (--algo wgmma_tma_padded)
VARIANTS["wgmma_tma_padded"] = {
    "default (128x256 coop s4 g8)": {},
    "pingpong 128x128 s6 g16": {"PINGPONG": 1, "BN": 128, "STAGES": 6, "GROUP_M": 16},
    "pingpong 128x192 s5 g16": {"PINGPONG": 1, "BN": 192, "STAGES": 5, "GROUP_M": 16},
    "128x128 coop s6": {"BN": 128, "STAGES": 6},
    "64x128 1wg s7": {"BM": 64, "BN": 128, "WG": 1, "STAGES": 7},
}
VARIANTS["wgmma_tf32x3"] = {
    "default (64x128 1 consumer s4 fold2)": {},
    "fold1": {"FOLD": 1},
    "64x128 g16": {"GROUP_M": 16},
    "64x64 s6": {"BN": 64, "STAGES": 6},
    "128x128 coop s3": {"BM": 128, "WG": 2, "STAGES": 3},
    "128x64 coop s4": {"BM": 128, "WG": 2, "BN": 64, "STAGES": 4},
    "pingpong 64x128 s3": {"PINGPONG": 1, "WG": 2, "STAGES": 3},
    "cluster 2 64x128 s4": {"CLUSTER_M": 2},
}
# Few rows (decoding): the transposed product, K split over a cluster (--algo wgmma_skinny --family gemm_nt)
VARIANTS["wgmma_skinny"] = {
    f"{bn} wg{wg} s{stages} split{s}": {"BN": bn, "WG": wg, "STAGES": stages, "SPLIT_K": s}
    for bn, wg, stages in ((128, 1, 6), (64, 1, 8), (256, 2, 4), (128, 2, 6))
    for s in (1, 2, 4, 8)
}
VARIANTS["wgmma"] = {"default": {}}
VARIANTS["mma"] = {
    "default": {},
    "256x128 warps 64x64": {"BM": 256, "BN": 128},
    "128x256 s3": {"STAGES": 3},
    "128x256 s5": {"STAGES": 5},
    "128x256 BK64 s3": {"BK": 64, "STAGES": 3},
    "128x256 pad": {"SWIZZLE": 0},
    "128x128 warps 64x64 (2 blocks/SM)": {"BN": 128, "STAGES": 3, "MIN_BLOCKS": 2},
    "128x128 warps 64x32 dfrag": {"BN": 128, "WN": 32, "DOUBLE_FRAGS": 1},
    "split-K 4, 128x128": {"BN": 128, "SPLIT_K": 4},
    "32x128 warps 32x32": {"BM": 32, "BN": 128, "WM": 32, "WN": 32},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="mma", choices=sorted(VARIANTS))
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    parser.add_argument("--shapes", nargs="+", default=["4096x4096x4096", "127x4096x4096"])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--family", default="gemm", choices=("gemm", "gemm_nt", "gemm_tn", "linear"))
    parser.add_argument("--only", nargs="+", default=[], help="variants whose name holds all of these words")
    args = parser.parse_args()

    import torch

    from autotune.device import query_device
    from autotune.spaces import ALGO, get_space
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    for dtype in args.dtypes:
        space = get_space(args.family, dtype=dtype)
        for shape_text in args.shapes:
            shape = space.parse_shape(shape_text)
            m, n, k = shape
            torch.backends.cuda.matmul.allow_tf32 = False  # cuBLAS at FP32 for float32: the accuracy we answer at
            a = torch.rand(*((k, m) if args.family == "gemm_tn" else (m, k)), device="cuda").to(getattr(torch, dtype))
            b = torch.rand(*((n, k) if args.family in ("gemm_nt", "linear") else (k, n)), device="cuda")
            b = b.to(getattr(torch, dtype))
            bias = torch.rand(n, device="cuda").to(getattr(torch, dtype))
            vendor = {"gemm": lambda: torch.matmul(a, b), "gemm_nt": lambda: torch.matmul(a, b.T),
                      "gemm_tn": lambda: torch.matmul(a.T, b),
                      "linear": lambda: torch.nn.functional.linear(a, b, bias)}[args.family]  # fmt: skip
            cublas_ms = interleaved_medians({"cuBLAS": vendor}, args.reps, flush, torch)["cuBLAS"]
            cublas = space.metric(shape, cublas_ms)
            print(f"\n{args.family} {dtype} {shape_text} on {device.name}: cuBLAS {cublas:.1f} TFLOP/s")
            algo = args.algo.removesuffix("_split")
            base = {ALGO: algo, **space.algos[algo].default_config}
            configs = {name: {**base, **change} for name, change in VARIANTS[args.algo].items()
                       if all(word in name for word in args.only)}  # fmt: skip
            for name, config in list(configs.items()):
                problems = space.violations(config, shape, device)
                if problems:
                    print(f"  {name:>36}: not valid here: {problems[0]}")
                    del configs[name]
            with GpuEvaluator(space, shape, seed=0, min_time_ms=50.0, max_reps=args.reps) as evaluator:
                results = {name: f.result() for name, f in {n: evaluator.submit(c) for n, c in configs.items()}.items()}
            for name, r in results.items():
                if r.ok:
                    tflops = space.metric(shape, r.time_ms)
                    print(f"  {name:>36}: {tflops:7.1f} TFLOP/s {tflops / cublas:5.2f}x  regs {r.registers} "
                          f"spill {r.spill_bytes}  {space.describe(configs[name])}")  # fmt: skip
                else:
                    print(f"  {name:>36}: {r.failure} {r.reason}")
            print(json.dumps({"family": args.family, "dtype": dtype, "shape": shape_text, "cublas_tflops": cublas,
                              "algo": args.algo, "ours": {n: r.time_ms for n, r in results.items()}}))  # fmt: skip


if __name__ == "__main__":
    main()
