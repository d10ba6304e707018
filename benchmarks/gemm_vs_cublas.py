"""SGEMM: the stored tuned configuration against cuBLAS FP32 (torch and cupy, TF32 off), in one process.

    python benchmarks/gemm_vs_cublas.py [--db studies/autotune.db] [--shapes 4096x4096x4096 ...] [--trials 200]

For each shape the best configuration stored for this GPU is used (a search of --trials is run first where
none is stored). Every contender runs on the same inputs, on the same (default) stream, interleaved round
robin, each repetition after an L2 flush, timed with CUDA events; the median is reported. Our output is
checked against torch's in float64 first.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _timing import interleaved_medians

DEFAULT_SHAPES = ["4096x4096x4096", "1024x1024x1024", "1000x1000x1000"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None)
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES)
    parser.add_argument("--trials", type=int, default=200, help="search budget where no tuned config is stored")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.cuda.init()
    import pycuda.driver as cuda

    cuda.init()
    context = cuda.Device(0).retain_primary_context()  # torch's context: both see the same memory
    context.push()
    import atexit

    atexit.register(context.pop)  # pycuda aborts at exit if a context is left on the stack
    try:
        import cupy
    except ImportError:
        cupy = None

    from autotune.compiler import Compiler
    from autotune.device import query_device
    from autotune.search import tune
    from autotune.spaces import get_space
    from autotune.storage import Database, resolve_url

    device = query_device()
    space = get_space("gemm")
    current_hash = space.template_hash()
    compiler = Compiler(device.compile_arch)
    flush = torch.empty(max(2 * device.l2_bytes, 256 << 20), dtype=torch.uint8, device="cuda")
    results = []
    for shape_text in args.shapes:
        shape = space.parse_shape(shape_text)
        m, n, k = shape
        db = Database(resolve_url(args.db))
        rows = [r for r in db.best("gemm", device.name) if r.shape == shape_text and r.template_hash == current_hash]
        db.close()
        if not rows:
            print(f"{shape_text}: no tuned configuration stored; searching {args.trials} trials first", flush=True)
            tune("gemm", shape_text, trials=args.trials, db=args.db, seed=0)
            db = Database(resolve_url(args.db))
            rows = [r for r in db.best("gemm", device.name) if r.shape == shape_text and r.template_hash == current_hash]
            db.close()
        tuned = rows[0].config

        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.rand(m, k, device="cuda", generator=gen) * 2 - 1
        b = torch.rand(k, n, device="cuda", generator=gen) * 2 - 1
        ref = (a.double() @ b.double())

        def ours(config: dict) -> tuple:
            compiled = compiler.compile(space.template_for(config), space.compile_defines(config, shape))
            assert compiled.ok, compiled.error
            module = cuda.module_from_file(compiled.cubin)
            func = module.get_function("sgemm")
            (launch,) = space.launches(config, shape, device)
            if launch.shared_bytes > 48 * 1024:
                func.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, launch.shared_bytes)
            func.prepare("PPPiii")
            c = torch.empty(m, n, device="cuda")

            def run() -> None:  # the legacy default stream: torch's default stream too
                func.prepared_call(launch.grid[:2], launch.block, a.data_ptr(), b.data_ptr(), c.data_ptr(),
                                   m, n, k, shared_size=launch.shared_bytes)  # fmt: skip

            return run, c, module

        run_tuned, c_tuned, _m1 = ours(tuned)
        run_default, c_default, _m2 = ours(space.default_config)
        c_torch = torch.empty(m, n, device="cuda")
        contenders = {
            "tuned": run_tuned,
            "default": run_default,
            "cuBLAS (torch)": lambda: torch.matmul(a, b, out=c_torch),
        }
        if cupy is not None:
            ca, cb = cupy.from_dlpack(a), cupy.from_dlpack(b)
            cc = cupy.empty((m, n), dtype=cupy.float32)
            contenders["cuBLAS (cupy)"] = lambda: cupy.matmul(ca, cb, out=cc)
        medians = interleaved_medians(contenders, args.reps, flush, torch)
        errors = {
            name: float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
            for name, c in (("tuned", c_tuned), ("default", c_default), ("cuBLAS (torch)", c_torch))
        }
        flops = 2.0 * m * n * k
        row = {
            "shape": shape_text,
            "device": device.name,
            "tuned_config": tuned,
            "ms": medians,
            "tflops": {name: flops / (t * 1e-3) / 1e12 for name, t in medians.items()},
            "rel_error": errors,
        }
        row["tuned_vs_cublas"] = medians["cuBLAS (torch)"] / medians["tuned"]
        row["tuned_vs_default"] = medians["default"] / medians["tuned"]
        results.append(row)
        print(json.dumps(row), flush=True)
        del a, b, ref, c_tuned, c_default, c_torch

    print(f"\nSGEMM on {device.name} (cc {device.cc}, driver {device.driver_version}, nvcc {compiler.version}); "
          f"median of {args.reps} L2-flushed runs, TF32 off")  # fmt: skip
    header = f"{'shape':>16} {'tuned TFLOP/s':>14} {'default':>9} {'cuBLAS torch':>13} {'cupy':>7} {'tuned/cuBLAS':>13}"
    print(header)
    for r in results:
        t = r["tflops"]
        print(f"{r['shape']:>16} {t['tuned']:>14.2f} {t['default']:>9.2f} {t['cuBLAS (torch)']:>13.2f} "
              f"{t.get('cuBLAS (cupy)', float('nan')):>7.2f} {100 * r['tuned_vs_cublas']:>12.1f}%")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
