"""The GEMMs of a transformer's Linear layers through torch.ops.autotune against cuBLAS through torch, per layout.

    python benchmarks/linear_vs_torch.py [--model gpt2 llama] [--tokens 8192] [--dtypes bfloat16 float32]
                                         [--db studies/autotune.db] [--out results.json]

For each Linear (in, out) of the model at ``tokens`` rows: the forward ``linear`` (x·Wᵀ + b; ``gemm_nt`` where the
layer has no bias), and the backward's ``gemm`` (dX = dY·W) and ``gemm_tn`` (dW = dYᵀ·X). Ours runs what the
dispatcher picks for the shape from ``--db`` (a tuned configuration, else the rule default: say which); torch's is
`F.linear` / `torch.matmul` on the same views, which cuBLAS computes with its transpose flags, no copy. Same
process, interleaved, L2 flushed before each run, medians (benchmarks/_timing.py); fp32 with TF32 off (torch's
default, FP32 accuracy, as ours). Prints a table and the geomean ratio per (model, dtype).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved_medians  # noqa: E402

MODELS = {  # (in, out, bias) of each Linear
    "gpt2": [(768, 2304, True), (768, 768, True), (768, 3072, True), (3072, 768, True)],
    "llama": [(4096, 6144, False), (4096, 4096, False), (4096, 28672, False), (14336, 4096, False)],
}


def cases(torch: Any, model: str, tokens: int, dtype: Any) -> list[tuple[str, tuple, Any, Any]]:
    """(label, (kernel, M, N, K), ours, torch's) for each GEMM of each layer."""
    ops, out = torch.ops.autotune, []
    for fan_in, fan_out, has_bias in MODELS[model]:
        g = torch.Generator(device="cuda").manual_seed(fan_in + fan_out)
        x = torch.randn(tokens, fan_in, device="cuda", dtype=dtype, generator=g)
        w = torch.randn(fan_out, fan_in, device="cuda", dtype=dtype, generator=g) / math.sqrt(fan_in)
        b = torch.randn(fan_out, device="cuda", dtype=dtype, generator=g)
        dy = torch.randn(tokens, fan_out, device="cuda", dtype=dtype, generator=g)
        layer = f"{fan_in}->{fan_out}"
        if has_bias:
            out.append((f"{layer} fwd", ("linear", tokens, fan_out, fan_in), lambda x=x, w=w, b=b: ops.linear(x, w, b),
                        lambda x=x, w=w, b=b: torch.nn.functional.linear(x, w, b)))  # fmt: skip
        else:
            out.append((f"{layer} fwd", ("gemm_nt", tokens, fan_out, fan_in), lambda x=x, w=w: ops.gemm_nt(x, w),
                        lambda x=x, w=w: torch.nn.functional.linear(x, w)))  # fmt: skip
        out.append((f"{layer} dX", ("gemm", tokens, fan_in, fan_out), lambda dy=dy, w=w: ops.gemm(dy, w),
                    lambda dy=dy, w=w: torch.matmul(dy, w)))  # fmt: skip
        out.append((f"{layer} dW", ("gemm_tn", fan_out, fan_in, tokens), lambda dy=dy, x=x: ops.gemm_tn(dy, x),
                    lambda dy=dy, x=x: torch.matmul(dy.t(), x)))  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=["gpt2"], choices=sorted(MODELS))
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--db", default=None, help="results database (default: autotune's)")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    import autotune
    import autotune.torch as att

    if args.db:
        att.set_database(args.db)
    torch.backends.cuda.matmul.allow_tf32 = False
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows, kernels = [], {}

    def describe_choice(kernel: str, shape: tuple, dtype: str) -> str:
        """Which configuration the dispatcher runs at ``shape``: tuned (exact or nearest) or the rule default."""
        if kernel not in kernels:
            kernels[kernel] = autotune.load(kernel, db=args.db)
        choice = kernels[kernel].choice(shape, dtype)
        return f"{choice.source}: {kernels[kernel].space_for(dtype).describe(choice.config)}"

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; tokens {args.tokens}")
    for model in args.model:
        for name in args.dtypes:
            dtype = getattr(torch, name)
            ratios = []
            for label, (kernel, m, n, k), ours, theirs in cases(torch, model, args.tokens, dtype):
                medians = interleaved_medians({"ours": ours, "torch": theirs}, args.reps, flush, torch)
                flops = 2.0 * m * n * k
                choice = describe_choice(kernel, (m, n, k), name)
                ratio = medians["torch"] / medians["ours"]
                ratios.append(ratio)
                err = float((ours().double() - theirs().double()).norm() / theirs().double().norm())
                row = {"model": model, "dtype": name, "gemm": label, "kernel": kernel, "shape": [m, n, k],
                       "ms": medians, "tflops_ours": flops / medians["ours"] / 1e9,
                       "tflops_torch": flops / medians["torch"] / 1e9, "vs_torch": ratio, "choice": choice,
                       "rel_diff": err}  # fmt: skip
                rows.append(row)
                print(f"{model:6} {name:8} {label:16} {kernel:8} {m}x{n}x{k:<6} "
                      f"ours {row['tflops_ours']:6.1f} torch {row['tflops_torch']:6.1f} TFLOP/s  {ratio:5.2f}x  "
                      f"diff {err:.1e}  [{choice}]")  # fmt: skip
            geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"{model} {name}: geomean {geo:.3f}x torch over {len(ratios)} GEMMs")
    if args.out:
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
