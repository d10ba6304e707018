#!/usr/bin/env bash
# Session 2026-11-25 (second), device call 5: the operators' C++ launcher (autotune/torch/native): its build on a
# fresh machine, the torch GPU tests through it, and the per-call host time against torch's own ops.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database\|no configuration of .* tuned for"; }
which ninja c++ g++ | tee "$out/native_build.log"
( time python3 -c "
import logging; logging.basicConfig(level=logging.INFO)
import autotune.torch as att
from autotune.torch import native
print('native module:', native.module(), 'reason:', native.unavailable_reason())" ) >> "$out/native_build.log" 2>&1
tail -8 "$out/native_build.log"
timeout --signal=INT 240 python3 -m pytest -m gpu -q -p no:cacheprovider -n 6 tests/test_torch_gpu.py tests/test_gpu_library.py -k "torch or graph or record or opcheck or compile or bad or cpp" 2>&1 | tee "$out/torch_tests.log" | quiet | tail -25
timeout 100 python3 benchmarks/torch_overhead.py --out "$out/torch_overhead.json" 2>&1 | tee "$out/overhead.log" | quiet | tail -16
timeout 60 python3 benchmarks/dispatch_overhead.py --out "$out/dispatch_overhead.json" 2>&1 | tee -a "$out/overhead.log" | quiet | tail -7
