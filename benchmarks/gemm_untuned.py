"""GEMM with nothing tuned: the dispatcher's rule default for each shape class against cuBLAS through torch, in one
process (issue 19: at least 0.7x cuBLAS on every class, untuned).

    python benchmarks/gemm_untuned.py [--dtypes float32 float16 bfloat16] [--shapes 16x4096x4096 ...] [--out F]

An empty database, so every shape runs `GemmSpace.rule_default` (logged as such). Ours and cuBLAS (FP32 for
float32: TF32 off) run on the same inputs, interleaved, each repetition after an L2 flush, CUDA events; medians.
Relative errors against float64.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _timing import interleaved_medians

# One or more shapes per class: M = 1, M ≤ 16, ≤ 64, ≤ 256, skinny N, deep K, odd sizes, large.
SHAPES = ["1x4096x4096", "8x11008x4096", "16x4096x4096", "64x4096x4096", "200x4096x4096", "4096x64x4096",
          "16384x128x16384", "256x256x65536", "1024x1024x16384", "1000x1000x1000", "333x264x104", "4095x4097x1023",
          "2048x2048x2048", "4096x4096x4096"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    parser.add_argument("--shapes", nargs="+", default=SHAPES)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    import autotune
    from autotune.device import query_device
    from autotune.spaces import get_space

    torch.backends.cuda.matmul.allow_tf32 = False
    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    gemm = autotune.load("gemm", db=str(Path(tempfile.mkdtemp()) / "empty.db"))
    rows = []
    for dtype in args.dtypes:
        space = get_space("gemm", dtype=dtype)
        for text in args.shapes:
            m, n, k = space.parse_shape(text)
            gen = torch.Generator(device="cuda").manual_seed(m + n + k)
            a = (torch.rand(m, k, device="cuda", generator=gen) * 2 - 1).to(getattr(torch, dtype))
            b = (torch.rand(k, n, device="cuda", generator=gen) * 2 - 1).to(getattr(torch, dtype))
            ours, theirs = (torch.empty(m, n, device="cuda", dtype=a.dtype) for _ in range(2))
            contenders = {"ours": lambda: gemm(a, b, out=ours), "cuBLAS": lambda: torch.matmul(a, b, out=theirs)}
            ms = interleaved_medians(contenders, args.reps, flush, torch)
            ref = a.double() @ b.double()
            error = float((ours.double() - ref).norm() / ref.norm())
            choice = gemm.choice((m, n, k), dtype)
            row = {"dtype": dtype, "shape": text, "class": "/".join(space.shape_class((m, n, k))),
                   "config": space.describe(choice.config), "source": choice.source, "ms": ms,
                   "vs_cublas": ms["cuBLAS"] / ms["ours"], "rel_error": error,
                   "rel_error_cublas": float((theirs.double() - ref).norm() / ref.norm())}  # fmt: skip
            rows.append(row)
            print(f"{dtype:9s} {text:>16s} {row['class']:>13s}  {row['vs_cublas']:5.2f}x  "
                  f"{ms['ours'] * 1e3:9.1f} vs {ms['cuBLAS'] * 1e3:9.1f} us  err {error:.1e}  {row['config']}",
                  flush=True)  # fmt: skip
    worst = min(rows, key=lambda r: r["vs_cublas"])
    print(f"\nuntuned on {device.name}: worst {worst['vs_cublas']:.2f}x ({worst['dtype']} {worst['shape']})")
    if args.out:
        args.out.write_text(json.dumps({"device": device.to_dict(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
