#!/usr/bin/env bash
# Session 2026-11-25 (second), device call 1: the whole GPU tier on the restructured house (claims in the search
# loop, the split worker/GpuEvaluator/TunedKernel, the TMA split-K rule), in parallel with pytest-xdist except the
# process/signal tests, which run alone after.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/info.log"
timeout --signal=INT 420 python3 -m pytest -m gpu -q -p no:cacheprovider -n 12 --durations=10 \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py 2>&1 | tee "$out/gpu_tests_par.log" | quiet | tail -40
timeout --signal=INT 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_reliability.py tests/test_multi.py 2>&1 | tee "$out/gpu_tests_serial.log" | quiet | tail -15
