"""GEMM: the stored tuned configuration of each shape and dtype against cuBLAS, in one process.

    python benchmarks/gemm_vs_cublas.py [--db PATH] [--dtypes float32 float16 bfloat16] [--shapes 4096x4096x4096 ...]
                                        [--trials 120] [--trials-more 40] [--algos simt ...] [--fallback]
                                        [--out FILE.json]

For each dtype and shape, the configuration stored for this GPU is used; where none is stored a search runs first
(--trials for the first shape of a dtype, --trials-more for the others, which start from the leaders already
tuned). Then ours (through `autotune.load`, the user's path), cuBLAS through torch and, for float32, cuBLAS in
TF32 mode (lower precision: labelled, never a target) run on the same inputs, interleaved round robin, each
repetition after an L2 flush, timed with CUDA events; medians. Relative errors (Frobenius, against float64 on the
GPU) are reported for uniform inputs and, for float32, for wide-range inputs (rows and columns scaled by 2^±20),
next to the error of the SIMT algorithm's default configuration on the same inputs (the accuracy contract:
within 2x of an fp32 SIMT kernel). The SASS of each winner is checked for the tensor-core instructions its
algorithm must issue (HMMA for mma.sync, HGMMA for wgmma).

--fallback: the dispatcher's fallback with only 4096³ tuned (a fresh database holding that row alone), at
1x4096x4096, 16x4096x4096 and 16384x128x16384, against cuBLAS.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from _timing import interleaved_medians

NINE = ["4096x4096x4096", "8192x8192x8192", "2048x2048x2048", "1024x1024x1024", "1000x1000x1000",
        "127x4096x4096", "16384x16384x64", "4096x4096x1024", "8192x1024x8192"]  # fmt: skip
FALLBACK = ["1x4096x4096", "16x4096x4096", "16384x128x16384"]
SASS_NEEDS = {"mma": ("HMMA",), "tf32x3": ("HMMA",), "wgmma": ("HGMMA",), "wgmma_tma": ("HGMMA", "UTMALDG"),
              "wgmma_tf32x3": ("HGMMA", "UTMALDG")}


def rel_error(torch: Any, out: Any, ref: Any) -> float:
    return float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))


def inputs(torch: Any, m: int, n: int, k: int, dtype: Any, wide: bool, seed: int) -> tuple:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.rand(m, k, device="cuda", generator=gen) * 2 - 1
    b = torch.rand(k, n, device="cuda", generator=gen) * 2 - 1
    if wide:
        a *= torch.exp2(torch.randint(-20, 21, (m, 1), device="cuda", generator=gen).float())
        b *= torch.exp2(torch.randint(-20, 21, (1, n), device="cuda", generator=gen).float())
    return a.to(dtype), b.to(dtype)


def sass_count(cubin: str, needle: str) -> int | None:
    tool = shutil.which("cuobjdump")
    if tool is None:
        return None
    text = subprocess.run([tool, "-sass", cubin], capture_output=True, text=True).stdout
    return sum(needle in line for line in text.splitlines())


def stored(db: Any, device: Any, space: Any, shape: str) -> dict | None:
    current = space.template_hash()
    rows = [r for r in db.best("gemm", device.name, dtype=space.dtype) if r.shape == shape and r.template_hash == current]
    return rows[0] if rows else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/gemm-bench.db")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    parser.add_argument("--shapes", nargs="+", default=NINE)
    parser.add_argument("--trials", type=int, default=120, help="search budget of a dtype's first untuned shape")
    parser.add_argument("--trials-more", type=int, default=40, help="search budget of its other untuned shapes")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--algos", nargs="+", default=None,
                        help="search only these algorithms (use a database of its own: studies do not record it)")
    parser.add_argument("--fallback", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.init()

    import autotune
    from autotune.device import query_device
    from autotune.results.storage import Database, resolve_url
    from autotune.runtime.compiler import Compiler
    from autotune.spaces import get_space

    device = query_device()
    compiler = Compiler(device.compile_arch)
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    results: list[dict] = []
    for dtype in args.dtypes:
        space = get_space("gemm", dtype=dtype)
        tdtype = getattr(torch, dtype)
        tuned_any = False
        for shape_text in args.shapes:
            db = Database(resolve_url(args.db))
            row = stored(db, device, space, shape_text)
            db.close()
            if row is None:
                budget = args.trials_more if tuned_any else args.trials
                print(f"{dtype} {shape_text}: searching {budget} trials", flush=True)
                domains = {"ALGO": [a for a in args.algos if a in space.algos]} if args.algos else None
                autotune.tune("gemm", shape_text, dtype=dtype, trials=budget, db=args.db, seed=0, domains=domains)
                db = Database(resolve_url(args.db))
                row = stored(db, device, space, shape_text)
                db.close()
            tuned_any = True
            if row is None:
                print(f"{dtype} {shape_text}: no configuration passed validation", flush=True)
                continue
            results.append(measure(torch, autotune, space, shape_text, row.config, tdtype, args, flush, compiler, device))
            print(json.dumps(results[-1]), flush=True)
    fallback = run_fallback(torch, autotune, args, flush, device) if args.fallback else []
    report(results, fallback, device, compiler, args.reps)
    if args.out:
        args.out.write_text(json.dumps({"device": device.to_dict(), "gemm": results, "fallback": fallback}, indent=1))


def measure(torch: Any, autotune: Any, space: Any, shape_text: str, config: dict, tdtype: Any, args: Any, flush: Any,
            compiler: Any, device: Any) -> dict:  # fmt: skip
    m, n, k = space.parse_shape(shape_text)
    kernel = autotune.load("gemm", db=args.db, strict=True)
    a, b = inputs(torch, m, n, k, tdtype, False, 0)
    c_ours = torch.empty(m, n, device="cuda", dtype=tdtype)
    c_cublas = torch.empty(m, n, device="cuda", dtype=tdtype)
    contenders = {"ours": lambda: kernel(a, b, out=c_ours), "cuBLAS": lambda: torch.matmul(a, b, out=c_cublas)}
    if tdtype == torch.float32:
        c_tf32 = torch.empty(m, n, device="cuda")

        def tf32() -> None:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.matmul(a, b, out=c_tf32)
            torch.backends.cuda.matmul.allow_tf32 = False

        contenders["cuBLAS TF32 (lower precision)"] = tf32
    medians = interleaved_medians(contenders, args.reps, flush, torch)
    flops = 2.0 * m * n * k
    row: dict[str, Any] = {
        "dtype": space.dtype, "shape": shape_text, "algorithm": config.get("ALGO"), "config": config,
        "ms": medians, "tflops": {name: flops / (t * 1e-3) / 1e12 for name, t in medians.items()},
        "vs_cublas": medians["cuBLAS"] / medians["ours"],
    }  # fmt: skip
    ref = a.double() @ b.double()
    row["rel_error"] = {"ours": rel_error(torch, c_ours, ref), "cuBLAS": rel_error(torch, c_cublas, ref)}
    if tdtype == torch.float32:
        row["rel_error"]["cuBLAS TF32"] = rel_error(torch, c_tf32, ref)
        row["wide"] = wide_errors(torch, autotune, space, m, n, k, kernel, args.db, device)
    del ref
    compiled = compiler.compile(space.template_for(config), space.compile_defines(config, (m, n, k)))
    if compiled.cubin:
        row["sass"] = {needle: sass_count(compiled.cubin, needle) for needle in SASS_NEEDS.get(config.get("ALGO", ""), ())}
    return row


def wide_errors(torch: Any, autotune: Any, space: Any, m: int, n: int, k: int, kernel: Any, db: str, device: Any) -> dict:
    """Errors on wide-range inputs: ours, SIMT's default configuration (the contract's yardstick), cuBLAS."""
    from autotune.spaces import ALGO

    a, b = inputs(torch, m, n, k, torch.float32, True, 1)
    ref = a.double() @ b.double()
    simt_config = {ALGO: "simt", **space.algos["simt"].default_config}
    simt = pinned(autotune, space, f"{m}x{n}x{k}", simt_config, device)
    out = {
        "ours": rel_error(torch, kernel(a, b), ref),
        "simt": rel_error(torch, simt(a, b), ref),
        "cuBLAS": rel_error(torch, torch.matmul(a, b), ref),
    }
    out["ours_over_simt"] = out["ours"] / out["simt"] if out["simt"] else None
    return out


def pinned(autotune: Any, space: Any, shape_text: str, config: dict, device: Any) -> Any:
    """The dispatcher running exactly ``config`` at ``shape_text`` (a scratch database holding that row alone)."""
    from autotune.results.storage import BestEntry, Database, resolve_url

    path = str(Path(tempfile.mkdtemp()) / "pinned.db")
    db = Database(resolve_url(path))
    db.save_best(BestEntry(
        device_name=device.name, compute_capability=device.cc, kernel="gemm", shape=shape_text, dtype=space.dtype,
        template_hash=space.template_hash(), params=config, time_ms=1.0, metric=1.0, metric_unit="TFLOP/s",
        default_time_ms=None, driver_version=device.driver_version, nvcc_version="", study_name="pinned",
        trial_number=0,
    ))  # fmt: skip
    db.close()
    return autotune.load("gemm", db=path, strict=True)


def run_fallback(torch: Any, autotune: Any, args: Any, flush: Any, device: Any) -> list[dict]:
    """Only 4096³ tuned (float32): the dispatcher's choice at other shape classes, against cuBLAS."""
    from autotune.results.storage import BestEntry, Database, resolve_url

    source = Database(resolve_url(args.db))
    rows = [r for r in source.best("gemm", device.name, dtype="float32") if r.shape == "4096x4096x4096"]
    source.close()
    if not rows:
        return []
    r = rows[0]
    path = str(Path(tempfile.mkdtemp()) / "fallback.db")
    target = Database(resolve_url(path))
    target.save_best(BestEntry(**{f: getattr(r, f) for f in BestEntry.__dataclass_fields__ if f != "params"},
                               params=r.config))  # fmt: skip
    target.close()
    kernel = autotune.load("gemm", db=path)
    out = []
    for shape_text in FALLBACK:
        m, n, k = (int(x) for x in shape_text.split("x"))
        a, b = inputs(torch, m, n, k, torch.float32, False, 2)
        c1, c2 = torch.empty(m, n, device="cuda"), torch.empty(m, n, device="cuda")
        medians = interleaved_medians(
            {"ours": lambda: kernel(a, b, out=c1), "cuBLAS": lambda: torch.matmul(a, b, out=c2)}, args.reps, flush, torch
        )
        choice = kernel.choice((m, n, k), "float32")
        ref = a.double() @ b.double()
        out.append({
            "shape": shape_text, "ms": medians, "vs_cublas": medians["cuBLAS"] / medians["ours"],
            "source": choice.source, "algorithm": choice.config.get("ALGO"), "rel_error": rel_error(torch, c1, ref),
        })  # fmt: skip
        print(json.dumps(out[-1]), flush=True)
    return out


def report(results: list[dict], fallback: list[dict], device: Any, compiler: Any, reps: int) -> None:
    import math

    print(f"\nGEMM on {device.name} (cc {device.cc}, driver {device.driver_version}, nvcc {compiler.version}); "
          f"median of {reps} L2-flushed runs; cuBLAS through torch")  # fmt: skip
    for dtype in dict.fromkeys(r["dtype"] for r in results):
        rows = [r for r in results if r["dtype"] == dtype]
        print(f"\n{dtype}")
        tf32 = "cuBLAS TF32 (lower precision)"
        head = f"{'shape':>16} {'algo':>13} {'ours TFLOP/s':>12} {'cuBLAS':>8} {'ratio':>6} {'err ours':>9} {'err cuBLAS':>10}"
        if dtype == "float32":
            head += f" {'wide: ours/simt':>15} {'TF32 TFLOP/s':>12} {'TF32 err':>9}"
        print(head + "  SASS")
        for r in rows:
            t, e = r["tflops"], r["rel_error"]
            line = (f"{r['shape']:>16} {r['algorithm']:>13} {t['ours']:>12.1f} {t['cuBLAS']:>8.1f} "
                    f"{r['vs_cublas']:>5.2f}x {e['ours']:>9.1e} {e['cuBLAS']:>10.1e}")  # fmt: skip
            if dtype == "float32":
                w = r.get("wide", {})
                ratio = w.get("ours_over_simt")
                line += f" {ratio if ratio is not None else float('nan'):>15.2f} {t.get(tf32, float('nan')):>12.1f} "
                line += f"{e.get('cuBLAS TF32', float('nan')):>9.1e}"
            print(line + "  " + json.dumps(r.get("sass", {})))
        geo = math.exp(sum(math.log(r["vs_cublas"]) for r in rows) / len(rows))
        print(f"geomean ours/cuBLAS over {len(rows)} shapes: {geo:.3f}x")
    if fallback:
        print("\nfallback with only 4096³ tuned (float32)")
        for f in fallback:
            print(f"{f['shape']:>16} {f['source']:>8} {f['algorithm']:>8} {f['vs_cublas']:>6.2f}x cuBLAS  err {f['rel_error']:.1e}")


if __name__ == "__main__":
    main()
