"""First-call latency of a configuration by each route to its cubin: cached, NVRTC, nvcc (ms).

    python benchmarks/first_call.py [--kernels softmax gemm] [--out first_call.json]

Each measurement runs in a fresh process with its own empty compile cache (``$AUTOTUNE_CACHE_DIR``) and the
route forced (``$AUTOTUNE_CUBIN_ROUTE``): the time from the first ``kernel(*tensors)`` call to its completion
(choose, get the cubin, load the module, launch, synchronise), then the second call's for scale. "cached" is
measured after the NVRTC run has filled that process's cache, as ``autotune import`` of a file exported
``--with-binaries`` does. Needs torch; NVRTC needs ``pip install 'autotune[nvrtc]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = r"""
import json, sys, time, torch
import autotune
kernel = sys.argv[1]
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()   # the context, outside the timing
if kernel == "gemm":
    args = (torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda"))
else:
    args = (torch.randn(4096, 1024, device="cuda"),)
k = autotune.load(kernel)
times = []
for _ in range(2):
    start = time.perf_counter(); k(*args); torch.cuda.synchronize(); times.append((time.perf_counter() - start) * 1e3)
print(json.dumps(times))
"""


def measure(kernel: str, route: str, cache: Path) -> list[float] | str:
    env = dict(os.environ, AUTOTUNE_CACHE_DIR=str(cache), AUTOTUNE_CUBIN_ROUTE=route,
               AUTOTUNE_DB=str(cache / "none.db"))  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", PROBE, kernel], capture_output=True, text=True, env=env)
    if proc.returncode:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"exit {proc.returncode}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=["softmax", "gemm"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import torch

    print(f"first call on {torch.cuda.get_device_name()} (default configuration, fresh process each):")
    results: dict[str, dict] = {}
    for kernel in args.kernels:
        results[kernel] = {}
        for label, route, fresh in (("nvcc", "nvcc", True), ("NVRTC", "nvrtc", True), ("cached cubin", "cached", False)):
            if fresh:
                cache = Path(tempfile.mkdtemp(prefix=f"first-call-{route}-"))
            outcome = measure(kernel, route, cache)  # "cached" reuses the NVRTC run's cache
            results[kernel][route] = outcome
            if isinstance(outcome, str):
                print(f"  {kernel:8s} {label:13s} failed: {outcome}")
            else:
                print(f"  {kernel:8s} {label:13s} first call {outcome[0]:9.1f} ms   second {outcome[1]:.3f} ms")
    if args.out:
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "ms": results}, indent=1))


if __name__ == "__main__":
    main()
