#!/usr/bin/env bash
# Session 2026-11-25, device call 3: wgmma_tma variants (ping-pong fixed, clusters with multicast) against cuBLAS;
# a cold 200-trial bf16 4096^3 search (issue 19's 45 s target); the GPU tests call 2 did not reach.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{"; }
timeout 200 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --shapes 4096x4096x4096 8192x8192x8192 --reps 20 2>&1 | tee "$out/configs.log" | quiet
rm -f /tmp/s.db
( time AUTOTUNE_CACHE_DIR=/tmp/cold autotune search gemm --dtype bfloat16 --trials 200 --db /tmp/s.db --seed 1 ) > "$out/search.log" 2>&1
tail -25 "$out/search.log"
timeout --signal=INT 230 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_reliability.py tests/test_gpu_search.py tests/test_multi.py tests/test_spaces_gemm_mma.py tests/test_torch_gpu.py tests/test_gpu_library.py 2>&1 | tee "$out/gpu_tests_rest.log" | quiet | tail -15
