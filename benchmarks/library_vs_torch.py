"""The kernel library against torch's own ops and the device's copy bandwidth, in one process.

    python benchmarks/library_vs_torch.py [--kernels softmax layernorm ...] [--dtype float32 float16 bfloat16]
                                          [--trials 30] [--db PATH] [--untuned] [--shapes 4096x50257 ...]
                                          [--domains JSON --sampler grid]

For each kernel, dtype and shape: tune (a search of --trials unless the database already holds a result), load
the result through the dispatcher (`autotune.load`), and time it and torch's op on the same tensors, interleaved,
each repetition after an L2 flush, with CUDA events; medians. GB/s counts the bytes each op must move at least
(inputs read once, outputs written once, in their dtypes); the copy bandwidth is a device-to-device copy, bytes
read + written. ``--untuned``: no search, and the dispatcher reads an empty database, so what runs is the space's
rule-based default for the shape (what a user gets on a shape nobody tuned). Kernels a dtype does not apply to
(histogram: int32 only) run once, at their own dtype.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _timing import interleaved_medians

ROW_SHAPES = ["8192x768", "4096x4096", "16384x8192", "65536x1024", "1024x65536", "4096x50257", "1x12288"]
VECTOR_SHAPES = [str(1 << 20), str(1 << 24), str(1 << 26), str(1 << 28)]
SHAPES = {
    "sgemv": ROW_SHAPES, "softmax": ROW_SHAPES, "layernorm": ROW_SHAPES, "layernorm_backward": ROW_SHAPES,
    "rmsnorm": ROW_SHAPES, "rmsnorm_backward": ROW_SHAPES, "sum": VECTOR_SHAPES, "max": VECTOR_SHAPES,
    "add": VECTOR_SHAPES, "relu": VECTOR_SHAPES, "sigmoid": VECTOR_SHAPES, "gelu": VECTOR_SHAPES,
    "dot": VECTOR_SHAPES, "histogram": [f"{1 << 24}x256", f"{1 << 26}x256", f"{1 << 26}x4096"],
}  # fmt: skip


def torch_op(kernel: str, t: dict, shape: tuple, torch):
    """torch's own op on the same inputs, writing into preallocated outputs where torch allows."""
    F = torch.nn.functional
    x = t.get("x", t.get("A", t.get("values")))
    if kernel == "sgemv":
        out = torch.empty(shape[0], device="cuda", dtype=x.dtype)
        return lambda: torch.mv(t["A"], t["x"], out=out)
    if kernel == "sum":  # fp32 accumulation and result, like ours
        return lambda: torch.sum(t["x"], dim=0, dtype=torch.float32)
    if kernel == "max":
        return lambda: torch.max(t["x"])
    if kernel == "dot":
        return lambda: torch.dot(t["x"], t["y"])
    if kernel == "histogram":
        return lambda: torch.bincount(t["values"], minlength=shape[1])  # values drawn in [0, bins): no cut needed
    if kernel == "softmax":
        out = torch.empty(shape, device="cuda", dtype=x.dtype)
        return lambda: torch.softmax(t["x"], dim=1, out=out)
    if kernel == "layernorm":
        return lambda: torch.native_layer_norm(t["x"], [shape[1]], t["weight"], t["bias"], 1e-5)
    if kernel == "layernorm_backward":
        bias = torch.zeros(shape[1], device="cuda", dtype=t["weight"].dtype)
        return lambda: torch.ops.aten.native_layer_norm_backward(
            t["dy"], t["x"], [shape[1]], t["mean"], t["rstd"], t["weight"], bias, [True, True, True])
    if kernel == "rmsnorm":
        return lambda: F.rms_norm(t["x"], [shape[1]], t["weight"], 1e-6)
    if kernel == "rmsnorm_backward":
        xd = t["x"].detach().requires_grad_(True)
        wd = t["weight"].detach().requires_grad_(True)
        y = F.rms_norm(xd, [shape[1]], wd, 1e-6)  # torch recomputes rstd in its backward: it has no rstd input
        return lambda: torch.autograd.grad(y, (xd, wd), t["dy"], retain_graph=True)
    if kernel == "add":
        out = torch.empty(shape, device="cuda", dtype=x.dtype)
        return lambda: torch.add(t["x"], t["y"], out=out)
    if kernel == "relu":
        return lambda: torch.relu(t["x"])
    if kernel == "sigmoid":
        out = torch.empty(shape, device="cuda", dtype=x.dtype)
        return lambda: torch.sigmoid(t["x"], out=out)
    if kernel == "gelu":
        return lambda: F.gelu(t["x"])
    raise KeyError(kernel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=list(SHAPES))
    parser.add_argument("--dtype", nargs="+", default=["float32"], help="float32 float16 bfloat16")
    parser.add_argument("--shapes", nargs="+", default=None, help="instead of each kernel's suite")
    parser.add_argument("--untuned", action="store_true", help="no search; the dispatcher with no stored row")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--domains", type=json.loads, default=None,
                        help='narrow the searched space, e.g. \'{"CACHE": [2], "BLOCK": [256, 512]}\'')
    parser.add_argument("--sampler", default=None, help="the search's sampler (default: autotune's)")
    parser.add_argument("--db", default="/tmp/library.db")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    import autotune
    from autotune.device import query_device
    from autotune.results.storage import Database, resolve_url

    device = query_device()
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    big = torch.empty(1 << 29, dtype=torch.float32, device="cuda")  # 2 GiB
    copy_dst = torch.empty_like(big)
    copy_ms = interleaved_medians({"copy": lambda: copy_dst.copy_(big)}, 10, flush, torch)["copy"]
    copy_gbs = 2 * big.numel() * 4 / (copy_ms * 1e-3) / 1e9
    del big, copy_dst
    print(f"{device.name}: device-to-device copy {copy_gbs:.0f} GB/s (read + write)", flush=True)

    results = []
    empty_db = "/tmp/library_vs_torch_untuned.db"
    for kernel in args.kernels:
        kernel_dtypes = autotune.get_space(kernel).supported_dtypes()
        for dtype in [d for d in args.dtype if d in kernel_dtypes] or [kernel_dtypes[0]]:
            for shape_text in args.shapes or SHAPES[kernel]:
                row = measure(kernel, dtype, shape_text, args, device, copy_gbs, flush, empty_db, torch, autotune,
                              Database, resolve_url)  # fmt: skip
                results.append(row)
                if args.out:  # after every row: a run cut short keeps what it measured
                    args.out.write_text(json.dumps({"copy_GBs": copy_gbs, "results": results}, indent=1))


def make_inputs(space, shape, torch) -> dict:
    """Random inputs in each buffer's dtype (positive rstd; histogram values inside [0, bins))."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    tensors = {}
    for name, spec in space.input_specs(shape).items():
        if spec.dtype == "int32":
            high = shape[1] if name == "values" else 100
            tensors[name] = torch.randint(0, high, spec.shape, device="cuda", generator=gen, dtype=torch.int32)
            if name == "base":
                tensors[name].zero_()
            continue
        tensor = torch.randn(spec.shape, device="cuda", generator=gen)
        tensor = tensor.abs() + 0.5 if name == "rstd" else tensor
        tensors[name] = tensor.to(getattr(torch, spec.dtype))
    return tensors


def measure(kernel, dtype, shape_text, args, device, copy_gbs, flush, empty_db, torch, autotune, Database,
            resolve_url) -> dict:
    space = autotune.get_space(kernel, dtype=dtype)
    shape = space.parse_shape(shape_text)
    search_s = 0.0
    if args.untuned:
        tuned = autotune.load(kernel, db=empty_db)
    else:
        database = Database(resolve_url(args.db))
        current = space.template_hash()
        stored = [r for r in database.best(kernel, device.name) if r.shape == shape_text and r.dtype == dtype
                  and r.template_hash == current]  # fmt: skip
        database.close()
        if not stored:
            start = time.perf_counter()
            extra = {"sampler": args.sampler} if args.sampler else {}
            autotune.tune(kernel, shape_text, dtype=dtype, trials=args.trials, db=args.db, seed=0,
                          domains=args.domains, **extra)  # fmt: skip
            search_s = time.perf_counter() - start
        tuned = autotune.load(kernel, db=args.db, strict=True)
    tensors = make_inputs(space, shape, torch)
    names = list(space.input_specs(shape))
    ours_out = tuned(*[tensors[n] for n in names])  # allocates the outputs once
    outs = ours_out if isinstance(ours_out, tuple) else (ours_out,)
    theirs = torch_op(kernel, tensors, shape, torch)
    reference = theirs()
    reference = reference if isinstance(reference, tuple) else (reference,)
    error = max(float(torch.linalg.norm(a.double().reshape(-1) - b.double().reshape(-1))
                      / torch.linalg.norm(b.double().reshape(-1)))
                for a, b in zip(outs, reference))  # fmt: skip
    out_arg = outs if len(outs) > 1 else outs[0]
    medians = interleaved_medians(
        {"autotune": lambda: tuned(*[tensors[n] for n in names], out=out_arg), "torch": theirs},
        args.reps, flush, torch,
    )
    gbs = {k: space.work(shape) / (v * 1e-3) / 1e9 for k, v in medians.items()}
    choice = tuned.choice(shape, dtype)
    row = {
        "kernel": kernel, "dtype": dtype, "shape": shape_text, "device": device.name, "ms": medians, "GB/s": gbs,
        "copy_share": gbs["autotune"] / copy_gbs, "torch_copy_share": gbs["torch"] / copy_gbs,
        "speedup_vs_torch": medians["torch"] / medians["autotune"], "max_rel_diff_vs_torch": error,
        "config": choice.config, "source": choice.source, "search_s": search_s,
    }  # fmt: skip
    print(f"{kernel:>18} {dtype:>8} {shape_text:>13}  autotune {gbs['autotune']:7.0f} GB/s "
          f"({100 * row['copy_share']:5.1f}% of copy)  torch {gbs['torch']:7.0f} GB/s  "
          f"x{row['speedup_vs_torch']:.2f}  diff {error:.1e}  {choice.source}  search {search_s:.0f} s",
          flush=True)  # fmt: skip
    del tensors, ours_out, outs, reference
    torch.cuda.empty_cache()
    return row

if __name__ == "__main__":
    main()
