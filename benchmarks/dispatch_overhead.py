"""Per-call host overhead of ``gemm(A, B, out=C)`` on device arrays, over a raw launch of the same cubin (pycuda's
prepared call, and cuLaunchKernel through ctypes with the parameter block filled beforehand: the floor), and of
the `LaunchPlan` alone (issue 21: a warmed call within 2 µs of the raw driver launch).

    python benchmarks/dispatch_overhead.py

Each batch first parks the GPU on a long sleep kernel, then issues CALLS launches: they queue behind it, so the
host time per call is the launch path alone, not the kernel. Median over batches.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import tempfile
import time
from pathlib import Path

CALLS = 200
SLEEP_CYCLES = 8_000_000  # about 4 ms at H100/H200 clocks: longer than CALLS launches take to issue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    torch.cuda.init()
    import pycuda.driver as cuda

    cuda.init()
    context = cuda.Device(0).retain_primary_context()
    context.push()
    import atexit

    atexit.register(context.pop)

    import autotune
    from autotune.device import query_device
    from autotune.results.storage import BestEntry, Database, resolve_url
    from autotune.runtime.compiler import Compiler
    from autotune.runtime.cuda_driver import Driver
    from autotune.spaces import get_space

    device = query_device()
    space = get_space("gemm")
    shape = (64, 64, 64)
    config = dict(space.default_config)
    db = str(Path(tempfile.mkdtemp()) / "overhead.db")
    database = Database(resolve_url(db))
    database.save_best(BestEntry(
        device_name=device.name, compute_capability=device.cc, kernel="gemm", shape="64x64x64", dtype="float32",
        template_hash=space.template_hash(), params=config, time_ms=0.01, metric=1.0, metric_unit="TFLOP/s",
        default_time_ms=None, driver_version=device.driver_version, nvcc_version="", study_name="overhead",
        trial_number=0,
    ))  # fmt: skip
    database.close()

    a = torch.rand(64, 64, device="cuda")
    b = torch.rand(64, 64, device="cuda")
    c = torch.empty(64, 64, device="cuda")
    gemm = autotune.load("gemm", db=db)
    gemm(a, b, out=c)  # compile, load, plan

    compiled = Compiler(device.compile_arch).compile(space.template_for(config), space.compile_defines(config, shape))
    module = cuda.module_from_file(compiled.cubin)
    func = module.get_function("sgemm")
    (launch,) = space.launches(config, shape, device)
    func.prepare("PPPiii")
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()

    def raw_pycuda() -> None:
        func.prepared_async_call(launch.grid[:2], launch.block, None, pa, pb, pc, 64, 64, 64,
                                 shared_size=launch.shared_bytes)  # fmt: skip

    driver = Driver.get()
    raw_function = driver.function(driver.load_module(Path(compiled.cubin).read_bytes()), "sgemm")
    holders = [ctypes.c_uint64(pa), ctypes.c_uint64(pb), ctypes.c_uint64(pc), *(ctypes.c_int32(64),) * 3]
    params = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])

    def raw_driver() -> None:  # the launch alone, parameters already in place: the floor of any dispatcher
        driver.launch(raw_function, launch.grid, launch.block, launch.shared_bytes, 0, params)

    plan = next(iter(gemm._plans.values()))
    pointers = [pa, pb, pc]

    contenders = {
        "raw pycuda prepared_async_call": raw_pycuda,
        "raw cuLaunchKernel (ctypes)": raw_driver,
        "LaunchPlan.launch": lambda: plan.launches.launch(pointers, 0),
        "gemm(A, B, out=C, stream=0)": lambda: gemm(a, b, out=c, stream=0),
        "gemm(A, B, out=C)  [torch current stream]": lambda: gemm(a, b, out=c),
    }
    per_call: dict[str, list[float]] = {name: [] for name in contenders}
    for fn in contenders.values():
        for _ in range(50):
            fn()
    torch.cuda.synchronize()
    for _ in range(args.batches):
        for name, fn in contenders.items():
            torch.cuda._sleep(SLEEP_CYCLES)  # park the GPU: the launches below only queue
            start = time.perf_counter_ns()
            for _ in range(CALLS):
                fn()
            per_call[name].append((time.perf_counter_ns() - start) / CALLS / 1000)
            torch.cuda.synchronize()
    medians = {name: statistics.median(v) for name, v in per_call.items()}
    base = medians["raw pycuda prepared_async_call"]
    floor = medians["raw cuLaunchKernel (ctypes)"]
    print(f"per-call host time on {device.name}, {CALLS} calls x {args.batches} batches, median (µs):")
    for name, value in medians.items():
        print(f"  {name:45s} {value:7.2f}   over raw pycuda {value - base:+6.2f}   "
              f"over raw driver {value - floor:+6.2f}")
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    if args.out:
        args.out.write_text(json.dumps({"device": device.name, "median_us": medians}, indent=1))


if __name__ == "__main__":
    main()
