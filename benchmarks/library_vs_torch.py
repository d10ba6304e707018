"""The kernel library against torch's own ops and the device's copy bandwidth, in one process.

    python benchmarks/library_vs_torch.py [--kernels softmax layernorm ...] [--dtype float32 float16 bfloat16]
                                          [--trials 30] [--db PATH] [--untuned] [--shapes 4096x50257 ...]
                                          [--domains JSON --sampler grid]

For each kernel, dtype and shape: tune (a search of --trials unless the database already holds a result), load
the result through the dispatcher (`autotune.load`), and time it and torch's op on the same tensors, interleaved,
each repetition after an L2 flush, with CUDA events; medians. GB/s counts the bytes each op must move at least
(inputs read once, outputs written once, in their dtypes); the copy bandwidth is a device-to-device copy, bytes
read + written, measured once on 2 GiB, and again per row on the row's own bytes (a copy of that size: what the
bandwidth is at that size). ``--untuned``: no search, and the dispatcher reads an empty database, so what runs is the space's
rule-based default for the shape (what a user gets on a shape nobody tuned). Kernels a dtype does not apply to
(histogram: int32 only) run once, at their own dtype.

The norm backward kernels (``layernorm_backward``, ``rmsnorm_backward`` and their ``_mixed`` variants, fp32 weights
with half dy and x) are timed against torch's own backward through autograd (``torch.autograd.grad`` of
``F.layer_norm`` / ``F.rms_norm``, graph kept), on the mean and rstd torch's forward computed from the same x, so that
both answer the same problem (the error column compares them). Where torch takes no fp32 weight with half x, its
weights are cast to x's dtype (printed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _timing import interleaved_medians

LN_EPS = 1e-5  # autotune.spaces.layernorm.EPS
RMS_EPS = 1e-6  # autotune.spaces.rmsnorm.EPS

ROW_SHAPES = ["8192x768", "4096x4096", "16384x8192", "65536x1024", "1024x65536", "4096x50257", "1x12288"]
# Hidden sizes of 768 to 8192 at 8K rows and more (issue 22's targets), a ragged one, and the row suite's others
NORM_BACKWARD_SHAPES = ["8192x768", "8192x1024", "16384x2048", "8192x4096", "4096x4096", "16384x8192", "65536x1024",
                        "8193x3001", "1024x65536", "4096x50257", "1x12288"]
VECTOR_SHAPES = [str(1 << 20), str(1 << 24), str(1 << 26), str(1 << 28)]
SHAPES = {
    "sgemv": ROW_SHAPES, "softmax": ROW_SHAPES, "softmax_backward": ROW_SHAPES, "layernorm": ROW_SHAPES,
    "rmsnorm": ROW_SHAPES,
    "layernorm_backward": NORM_BACKWARD_SHAPES, "rmsnorm_backward": NORM_BACKWARD_SHAPES,
    "layernorm_backward_mixed": NORM_BACKWARD_SHAPES, "rmsnorm_backward_mixed": NORM_BACKWARD_SHAPES,
    "sum": VECTOR_SHAPES, "max": VECTOR_SHAPES,
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
    if kernel == "softmax_backward":  # what softmax's autograd node runs
        return lambda: torch._softmax_backward_data(t["dy"], t["y"], 1, t["y"].dtype)
    if kernel == "layernorm":
        return lambda: torch.native_layer_norm(t["x"], [shape[1]], t["weight"], t["bias"], 1e-5)
    if kernel.startswith(("layernorm_backward", "rmsnorm_backward")):
        return norm_backward_through_autograd(kernel, t, shape, torch)
    if kernel == "rmsnorm":
        return lambda: F.rms_norm(t["x"], [shape[1]], t["weight"], 1e-6)
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


def norm_backward_through_autograd(kernel: str, t: dict, shape: tuple, torch):
    """torch's backward of its own layer_norm / rms_norm through autograd (the graph built once and kept), given
    the same dy, x and weight; fp32 weights with half x where torch takes them, else cast to x's dtype."""
    F = torch.nn.functional
    rms = kernel.startswith("rmsnorm")
    x = t["x"].detach().requires_grad_(True)
    weights = [t["weight"]] if rms else [t["weight"], torch.zeros_like(t["weight"])]
    for cast in (False, True):
        params = [w.detach().to(x.dtype if cast else w.dtype).requires_grad_(True) for w in weights]
        try:
            if rms:
                y = F.rms_norm(x, [shape[1]], params[0], RMS_EPS)
            else:
                y = F.layer_norm(x, [shape[1]], params[0], params[1], LN_EPS)
            dy = t["dy"].to(y.dtype)
            torch.autograd.grad(y, (x, *params), dy, retain_graph=True)
        except RuntimeError as exc:
            if cast or params[0].dtype == x.dtype:
                raise
            print(f"torch takes no {params[0].dtype} weights with {x.dtype} x ({str(exc).splitlines()[0]}): cast")
            continue
        return lambda: torch.autograd.grad(y, (x, *params), dy, retain_graph=True)
    raise AssertionError("unreachable")


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
    """Random inputs in each buffer's dtype (positive rstd; histogram values inside [0, bins)). The norm backward
    kernels get the mean and rstd of their x, as torch's forward computes them (fp32 statistics)."""
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
    if space.name.startswith(("layernorm_backward", "rmsnorm_backward")):
        x = tensors["x"].float()
        if "mean" in tensors:
            var, mean = torch.var_mean(x, dim=1, correction=0)
            tensors["mean"], tensors["rstd"] = mean, torch.rsqrt(var + LN_EPS)
        else:
            tensors["rstd"] = torch.rsqrt(x.pow(2).mean(dim=1) + RMS_EPS)
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
    # A copy of the op's bytes (half read, half written): what "copy bandwidth" reaches at this size, where a
    # problem of a few tens of MB is bound by the launch and the memory system's ramp, not the bandwidth.
    copy_src = torch.empty(max(1, int(space.work(shape)) // 2), dtype=torch.uint8, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    medians = interleaved_medians(
        {"autotune": lambda: tuned(*[tensors[n] for n in names], out=out_arg), "torch": theirs,
         "copy": lambda: copy_dst.copy_(copy_src)},
        args.reps, flush, torch,
    )  # fmt: skip
    gbs = {k: space.work(shape) / (v * 1e-3) / 1e9 for k, v in medians.items()}
    choice = tuned.choice(shape, dtype)
    row = {
        "kernel": kernel, "dtype": dtype, "shape": shape_text, "device": device.name, "ms": medians, "GB/s": gbs,
        "copy_share": gbs["autotune"] / copy_gbs, "torch_copy_share": gbs["torch"] / copy_gbs,
        "same_bytes_copy_GBs": gbs["copy"], "same_bytes_copy_share": gbs["autotune"] / gbs["copy"],
        "speedup_vs_torch": medians["torch"] / medians["autotune"], "max_rel_diff_vs_torch": error,
        "config": choice.config, "source": choice.source, "search_s": search_s,
    }  # fmt: skip
    print(f"{kernel:>18} {dtype:>8} {shape_text:>13}  autotune {gbs['autotune']:7.0f} GB/s "
          f"({100 * row['copy_share']:5.1f}% of copy)  torch {gbs['torch']:7.0f} GB/s  "
          f"x{row['speedup_vs_torch']:.2f}  copy of its bytes {gbs['copy']:7.0f} GB/s "
          f"({100 * row['same_bytes_copy_share']:5.1f}%)  diff {error:.1e}  {choice.source}  search {search_s:.0f} s",
          flush=True)  # fmt: skip
    del tensors, ours_out, outs, reference, copy_src, copy_dst
    torch.cuda.empty_cache()
    return row

if __name__ == "__main__":
    main()
