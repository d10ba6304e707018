"""Vendor figures on this GPU, alone: cuBLAS GEMM per dtype, torch SDPA backends, copy bandwidth.

    python benchmarks/vendor_baselines.py [--out FILE.json]

Targets are set against these (each of our benchmarks also times the vendor in its own process; these are the
reference for planning). Same method as the benchmarks: L2 flushed before every run, CUDA events, medians.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _timing import interleaved_medians

GEMM = ["4096x4096x4096", "8192x8192x8192", "2048x2048x2048", "1024x1024x1024", "1000x1000x1000",
        "127x4096x4096", "16384x16384x64", "4096x4096x1024", "8192x1024x8192"]  # fmt: skip
# (batch, heads, seq_q, seq_kv, head_dim, causal)
ATTENTION = [(4, 16, 4096, 4096, 128, False), (4, 16, 4096, 4096, 128, True), (8, 8, 1024, 1024, 64, False),
             (1, 32, 1, 65536, 128, False), (16, 32, 1, 8192, 128, False)]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.backends.cuda.matmul.allow_tf32 = False
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    out: dict = {"device": torch.cuda.get_device_name(), "gemm": {}, "attention": {}}
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = interleaved_medians({"copy": lambda: dst.copy_(src)}, args.reps, flush, torch)["copy"]
    out["copy_gb_s"] = 2 * src.numel() / (ms * 1e-3) / 1e9
    del src, dst
    for dtype in ("float32", "float16", "bfloat16"):
        for shape in GEMM:
            m, n, k = (int(x) for x in shape.split("x"))
            a = torch.randn(m, k, device="cuda", dtype=getattr(torch, dtype))
            b = torch.randn(k, n, device="cuda", dtype=getattr(torch, dtype))
            ms = interleaved_medians({"mm": lambda: torch.mm(a, b)}, args.reps, flush, torch)["mm"]
            out["gemm"][f"{dtype} {shape}"] = 2 * m * n * k / (ms * 1e-3) / 1e12
            print(dtype, shape, f"{out['gemm'][f'{dtype} {shape}']:.1f} TFLOP/s", flush=True)
    for dtype in ("float16", "bfloat16"):
        for b, h, sq, skv, d, causal in ATTENTION:
            q = torch.randn(b, h, sq, d, device="cuda", dtype=getattr(torch, dtype))
            k = torch.randn(b, h, skv, d, device="cuda", dtype=getattr(torch, dtype))
            v = torch.randn_like(k)
            flops = 4 * b * h * sq * skv * d / (2 if causal else 1)
            for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
                try:
                    with sdpa_kernel([backend]):
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        ms = interleaved_medians(
                            {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)},
                            args.reps, flush, torch,
                        )["sdpa"]  # fmt: skip
                except RuntimeError as exc:
                    print(dtype, (b, h, sq, skv, d, causal), backend.name, "unavailable:", str(exc)[:80])
                    continue
                key = f"{dtype} {b}x{h}x{sq}x{skv}x{d}{' causal' if causal else ''} {backend.name}"
                out["attention"][key] = {"tflops": flops / (ms * 1e-3) / 1e12,
                                         "kv_gb_s": 2 * k.numel() * k.element_size() / (ms * 1e-3) / 1e9}  # fmt: skip
                print(key, json.dumps(out["attention"][key]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
