#!/usr/bin/env bash
# H100, run B: the rest of the GPU tier (library, attention, torch), then the side-by-side against Kernel Tuner.
set -u
export PYTHONUNBUFFERED=1
echo "=== tests ($(date +%T))"
timeout --signal=INT --kill-after=10 420 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gpu_library.py tests/test_gpu_attention.py tests/test_torch_gpu.py > $OUT/gpu_tests_b.log 2>&1
echo "tests rc=$? $(tail -n 1 $OUT/gpu_tests_b.log)"; grep -E "^(FAILED|ERROR)" $OUT/gpu_tests_b.log | head
echo "=== kernel tuner ($(date +%T))"
AUTOTUNE_CACHE_DIR=/tmp/kt timeout 150 python3 benchmarks/vs_kernel_tuner.py --budget 40 --out $OUT/vs_kernel_tuner.json > $OUT/vs_kt.log 2>&1
tail -n 8 $OUT/vs_kt.log
