"""Attention: the tuned kernels against torch's scaled_dot_product_attention, in one process.

    python benchmarks/attention_vs_torch.py [--db PATH] [--trials 40] [--dtypes float16 bfloat16]
        [--head-dims 128 64] [--seqs 1024 4096 16384] [--causal 0 1] [--decode | --no-decode] [--prefill | --no-prefill]
        [--decode-batches 1 16 64] [--decode-kv 8192 32768 131072] [--kv-heads 8]
        [--reps 20] [--out FILE.json] [--backward] [--untuned]

Prefill: batch x heads = 64 (4x16 at head_dim 128, 2x32 at 64), seq_q = seq_kv, causal and not. Decode: seq_q 1,
32 query heads over --kv-heads (8: grouped-query attention as Llama-style models run it; 32: multi-head), head_dim
128, --decode-batches x --decode-kv (seq_kv); torch's SDPA gets the same k and v with enable_gqa=True (backends
that refuse it are reported unavailable). For each case the configuration stored for this GPU
is used; where none is stored a search of --trials runs first (`autotune.tune`). Then ours through `autotune.load`
(the user's path; strict: the tuned row itself) and each torch SDPA backend available here (FLASH_ATTENTION, the
FlashAttention-2 baseline; CUDNN_ATTENTION; EFFICIENT_ATTENTION) run on the same inputs, interleaved round robin,
each repetition after an L2 flush, timed with CUDA events; medians. TFLOP/s = 4·b·h·sq·skv·d, halved for causal;
decode also as GB/s of K and V read; the counts of HMMA, HGMMA and UTMALDG in each tensor-core winner's SASS. Errors: relative L2 against float64 attention on the first two heads.
Causal cases have seq_q = seq_kv, where torch's is_causal (top-left) and ours (bottom-right) coincide.

--untuned: no search; ours is the dispatcher's rule default for the shape (what a user gets on a shape nobody tuned),
through `autotune.load` on an empty database.

--backward: the prefill cases' backward instead (`attention_backward`, `attention_causal_backward`): ours from the
o and lse of our forward, against each SDPA backend's backward (`torch.autograd.grad` of its own forward's output,
graph kept), same inputs and dO; TFLOP/s = 2.5× the forward's count (five matrix products to the forward's two).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from _timing import interleaved_medians

BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")


def cases(args: Any) -> list[tuple[str, tuple[int, ...], str]]:
    """(kernel, shape, label) for the requested prefill and decode cases."""
    out = []
    if args.prefill:
        for d in args.head_dims:
            b, h = (4, 16) if d == 128 else (2, 32)
            for seq in args.seqs:
                for causal in args.causal:
                    out.append(("attention_causal" if causal else "attention", (b, h, seq, seq, d), "prefill"))
    if args.decode:
        for skv in args.decode_kv:
            for b in args.decode_batches:
                out.append(("attention", (b, 32, args.kv_heads, 1, skv, 128), "decode"))
    return out


def stored(kernel: str, space: Any, shape_text: str, device: Any, db_url: str) -> dict | None:
    from autotune.results.storage import Database

    db = Database(db_url)
    try:
        rows = [r for r in db.best(kernel, device.name, dtype=space.dtype)
                if r.shape == shape_text and r.template_hash == space.template_hash()]  # fmt: skip
    finally:
        db.close()
    return rows[0].config if rows else None


def reference_error(torch: Any, q: Any, k: Any, v: Any, o: Any, causal: bool) -> float:
    """Relative L2 error of ``o`` against float64 attention over the first two heads (rows in chunks); query head i
    reads kv head i // group."""
    group = q.shape[1] // k.shape[1]
    qd = q[0, :2].double()
    kd, vd = (x[0, [0 // group, 1 // group]].double() for x in (k, v))
    sq, skv, d = qd.shape[1], kd.shape[1], qd.shape[2]
    num = den = 0.0
    for r0 in range(0, sq, 2048):
        s = qd[:, r0 : r0 + 2048] @ kd.transpose(1, 2) / math.sqrt(d)
        if causal:
            rows = torch.arange(r0, r0 + s.shape[1], device=s.device)[:, None] + (skv - sq)
            s = s.masked_fill(torch.arange(skv, device=s.device)[None, :] > rows, float("-inf"))
        ref = torch.softmax(s, dim=-1) @ vd
        num += float(((o[0, :2, r0 : r0 + 2048].double() - ref) ** 2).sum())
        den += float((ref**2).sum())
    return math.sqrt(num / den)


def measure(torch: Any, autotune: Any, kernel: str, space: Any, shape: tuple, config: dict, args: Any, flush: Any) -> dict:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from autotune.spaces._attention import attention_dims

    b, h, hkv, sq, skv, d = attention_dims(shape)
    causal = kernel == "attention_causal"
    gqa = {"enable_gqa": True} if hkv != h else {}
    tdtype = getattr(torch, space.dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = ((torch.rand(b, heads, n, d, device="cuda", generator=gen) * 2 - 1).to(tdtype)
               for heads, n in ((h, sq), (hkv, skv), (hkv, skv)))  # fmt: skip
    ours = autotune.load(kernel, db=args.db, strict=not args.untuned)
    o = torch.empty(b, h, sq, d, device="cuda", dtype=tdtype)
    lse = torch.empty(b, h, sq, device="cuda", dtype=torch.float32)
    contenders: dict[str, Any] = {"ours": lambda: ours(q, k, v, out=(o, lse))}
    outs = {"ours": o}
    for name in BACKENDS:
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with sdpa_kernel(backend):
                outs[name] = sdpa(q, k, v, is_causal=causal, **gqa)
        except RuntimeError as exc:  # not available for this shape, dtype or build
            print(f"  {name}: unavailable ({str(exc).splitlines()[0][:80]})", flush=True)
            continue

        def run(backend: Any = backend) -> None:
            with sdpa_kernel(backend):
                sdpa(q, k, v, is_causal=causal, **gqa)

        contenders[name] = run
    medians = interleaved_medians(contenders, args.reps, flush, torch)
    work = space.work(shape)
    kv_bytes = 2 * b * hkv * skv * d * q.element_size()
    torch_names = [n for n in medians if n != "ours"]
    fastest = min(torch_names, key=lambda n: medians[n]) if torch_names else None
    row: dict[str, Any] = {
        "kernel": kernel, "dtype": space.dtype, "shape": space.format_shape(shape), "algorithm": config.get("ALGO"),
        "config": space.describe(config), "ms": medians,
        "tflops": {n: work / (t * 1e-3) / 1e12 for n, t in medians.items()},
        "kv_gbps": {n: kv_bytes / (t * 1e-3) / 1e9 for n, t in medians.items()},
        "fastest_torch": fastest,
        "vs_flash": medians["FLASH_ATTENTION"] / medians["ours"] if "FLASH_ATTENTION" in medians else None,
        "vs_fastest": medians[fastest] / medians["ours"] if fastest else None,
    }  # fmt: skip
    row["rel_error"] = {n: reference_error(torch, q, k, v, out, causal) for n, out in outs.items()}
    if config.get("ALGO") in ("fa2", "split_kv"):
        row["sass_hmma"] = hmma_count(space, config, shape)
    return row


def measure_backward(torch: Any, autotune: Any, kernel: str, space: Any, shape: tuple, config: dict, args: Any,
                     flush: Any) -> dict:  # fmt: skip
    """Ours (`kernel`, a backward family) against each SDPA backend's backward on the same q, k, v, dO."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    b, h, sq, skv, d = shape
    causal = kernel == "attention_causal_backward"
    tdtype = getattr(torch, space.dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = ((torch.rand(b, h, n, d, device="cuda", generator=gen) * 2 - 1).to(tdtype)
                   for n in (sq, skv, skv, sq))  # fmt: skip
    o, lse = autotune.load(kernel.replace("_backward", ""), db=args.db)(q, k, v)
    ours = autotune.load(kernel, db=args.db, strict=not args.untuned)
    contenders: dict[str, Any] = {"ours": lambda: ours(q, k, v, o, do, lse)}
    grads = {"ours": ours(q, k, v, o, do, lse)}
    for name in BACKENDS:
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        try:
            with sdpa_kernel(backend):
                out = sdpa(*leaves, is_causal=causal)
                grads[name] = torch.autograd.grad(out, leaves, do, retain_graph=True)
        except RuntimeError as exc:
            print(f"  {name}: unavailable ({str(exc).splitlines()[0][:80]})", flush=True)
            continue

        def run(out: Any = out, leaves: list = leaves, backend: Any = backend) -> None:
            with sdpa_kernel(backend):
                torch.autograd.grad(out, leaves, do, retain_graph=True)

        contenders[name] = run
    medians = interleaved_medians(contenders, args.reps, flush, torch)
    work = space.work(shape)  # 2.5 forwards
    torch_names = [n for n in medians if n != "ours"]
    fastest = min(torch_names, key=lambda n: medians[n]) if torch_names else None
    leaves = [x[0, :2].double().requires_grad_() for x in (q, k, v)]
    s = leaves[0] @ leaves[1].transpose(-1, -2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(sq, skv, dtype=torch.bool, device="cuda").triu(skv - sq + 1), float("-inf"))
    (torch.softmax(s, -1) @ leaves[2]).backward(do[0, :2].double())
    errors = {n: max(float(torch.linalg.norm(g[0, :2].double() - leaf.grad) / torch.linalg.norm(leaf.grad))
                     for g, leaf in zip(gs, leaves)) for n, gs in grads.items()}  # fmt: skip
    return {
        "kernel": kernel, "dtype": space.dtype, "shape": space.format_shape(shape), "algorithm": config.get("ALGO"),
        "config": space.describe(config), "ms": medians,
        "tflops": {n: work / (t * 1e-3) / 1e12 for n, t in medians.items()},
        "kv_gbps": {n: 0.0 for n in medians}, "fastest_torch": fastest,
        "vs_flash": medians["FLASH_ATTENTION"] / medians["ours"] if "FLASH_ATTENTION" in medians else None,
        "vs_fastest": medians[fastest] / medians["ours"] if fastest else None,
        "rel_error": errors,
    }  # fmt: skip


def hmma_count(space: Any, config: dict, shape: tuple) -> dict | None:
    """Tensor-core instructions (HMMA for mma.sync, HGMMA for wgmma) and TMA loads (UTMALDG) in the SASS of the
    configuration's cubin (None without cuobjdump)."""
    import shutil
    import subprocess

    from autotune.device import query_device
    from autotune.runtime.compiler import Compiler

    tool = shutil.which("cuobjdump")
    if tool is None:
        return None
    compiled = Compiler(query_device().compile_arch).compile(space.template_for(config), space.compile_defines(config, shape))
    if not compiled.cubin:
        return None
    text = subprocess.run([tool, "-sass", compiled.cubin], capture_output=True, text=True).stdout
    return {op: sum(op in line for line in text.splitlines()) for op in ("HMMA", "HGMMA", "UTMALDG")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/attention-bench.db")
    parser.add_argument("--trials", type=int, default=40, help="search budget of each untuned case")
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    parser.add_argument("--head-dims", nargs="+", type=int, default=[128, 64])
    parser.add_argument("--seqs", nargs="+", type=int, default=[1024, 4096, 16384])
    parser.add_argument("--causal", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--prefill", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--decode", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--decode-batches", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--decode-kv", nargs="+", type=int, default=[8192, 32768, 131072], help="seq_kv of decode")
    parser.add_argument("--kv-heads", type=int, default=8, help="kv heads of decode (32: multi-head)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--backward", action="store_true", help="the prefill cases' backward (see the module)")
    parser.add_argument("--untuned", action="store_true", help="no search: the rule default, through an empty database")
    args = parser.parse_args()
    if args.backward:
        args.decode = False
    if args.untuned:
        args.db = str(Path(args.db).with_name("attention-untuned-empty.db"))
        Path(args.db).unlink(missing_ok=True)

    import torch

    torch.cuda.init()
    import autotune
    from autotune.device import query_device
    from autotune.results.storage import resolve_url
    from autotune.spaces import get_space

    device = query_device()
    url = resolve_url(args.db)
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    results = []
    for dtype in args.dtypes:
        for kernel, shape, label in cases(args):
            kernel = kernel + "_backward" if args.backward else kernel
            space = get_space(kernel, dtype=dtype)
            shape_text = space.format_shape(shape)
            config = space.rule_default(shape, device) if args.untuned else stored(kernel, space, shape_text, device, url)
            if config is None:
                print(f"{kernel} {dtype} {shape_text}: searching {args.trials} trials", flush=True)
                autotune.tune(kernel, shape_text, dtype=dtype, trials=args.trials, db=args.db, seed=0)
                config = stored(kernel, space, shape_text, device, url)
            if config is None:
                print(f"{kernel} {dtype} {shape_text}: no configuration passed validation", flush=True)
                continue
            bench = measure_backward if args.backward else measure
            row = bench(torch, autotune, kernel, space, shape, config, args, flush)
            row["case"] = label
            results.append(row)
            print(json.dumps(row), flush=True)
            if args.out:  # after every case: a run cut at a machine's time limit keeps the cases it measured
                args.out.write_text(json.dumps({"device": device.to_dict(), "attention": results}, indent=1))
    report(results, device)


def report(results: list[dict], device: Any) -> None:
    import torch

    print(f"\nattention on {device.name} (cc {device.cc}, driver {device.driver_version}), torch {torch.__version__}; "
          "median of L2-flushed runs")  # fmt: skip
    head = (f"{'kernel':>16} {'dtype':>8} {'shape':>22} {'algo':>8} {'ours TF/s':>9} {'flash':>7} {'fastest torch':>24} "
            f"{'vs flash':>8} {'vs fastest':>10} {'KV GB/s':>8} {'err ours':>9} {'err flash':>9}")  # fmt: skip
    print(head)
    for r in results:
        t, fastest = r["tflops"], r["fastest_torch"]
        fast_text = f"{fastest} {t[fastest]:.1f}" if fastest else "-"
        ratio = lambda x: f"{x:.2f}x" if x else "-"  # noqa: E731
        gbps = f"{r['kv_gbps']['ours']:.0f}" if r["case"] == "decode" else ""
        print(f"{r['kernel']:>16} {r['dtype']:>8} {r['shape']:>22} {r['algorithm']:>8} {t['ours']:>9.1f} "
              f"{t.get('FLASH_ATTENTION', float('nan')):>7.1f} {fast_text:>24} {ratio(r['vs_flash']):>8} "
              f"{ratio(r['vs_fastest']):>10} {gbps:>8} {r['rel_error']['ours']:>9.1e} "
              f"{r['rel_error'].get('FLASH_ATTENTION', float('nan')):>9.1e}  SASS {r.get('sass_hmma')}")  # fmt: skip
    for label in ("prefill", "decode"):
        for key in ("vs_flash", "vs_fastest"):
            vals = [r[key] for r in results if r["case"] == label and r[key]]
            if vals:
                geo = math.exp(sum(map(math.log, vals)) / len(vals))
                print(f"{label} {key}: geomean {geo:.3f}x, worst {min(vals):.3f}x over {len(vals)} cases")


if __name__ == "__main__":
    main()
