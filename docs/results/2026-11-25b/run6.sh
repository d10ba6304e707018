#!/usr/bin/env bash
# Session 2026-11-25 (second), device call 6: TunedKernel's torch calls in the C++ launcher too
# (autotune/runtime/torch_launcher.cpp), the functions on the operators' overloads; GPU tests of both; overheads.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database\|no configuration of .* tuned for\|Warning\|warn\|^$\|_check_inputs"; }
( time python3 -c "
import autotune.torch as att
from autotune.runtime import torch_native
print('native module:', torch_native.module(), 'reason:', torch_native.unavailable_reason())" ) > "$out/native_build.log" 2>&1
tail -5 "$out/native_build.log"
timeout --signal=INT 300 python3 -m pytest -m gpu -q -p no:cacheprovider -n 8 tests/test_torch_gpu.py tests/test_gpu_dispatch.py tests/test_gpu_library.py tests/test_gpu_gemm_fallback.py 2>&1 | tee "$out/tests.log" | quiet | tail -12
timeout 100 python3 benchmarks/torch_overhead.py --out "$out/torch_overhead.json" 2>&1 | tee "$out/overhead.log" | quiet | tail -14
timeout 60 python3 benchmarks/dispatch_overhead.py --out "$out/dispatch_overhead.json" 2>&1 | tee -a "$out/overhead.log" | quiet | tail -6
