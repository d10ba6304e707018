#!/usr/bin/env bash
# Session 2026-11-25 (second), device call 2: wgmma_tf32x3's new default (one consumer, 64x128, four stages) and
# the early release of a window's stages; fp32's rule default on wgmma_tf32x3; GPU tests of both; the untuned
# rule defaults of every dtype against cuBLAS.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database"; }
timeout --signal=INT 200 python3 -m pytest -m gpu -q -p no:cacheprovider -n 12 tests/test_gpu_gemm.py tests/test_gpu_gemm_fallback.py tests/test_gpu_gemm_tf32.py -k "tf32 or fallback or rule or wgmma_tma" 2>&1 | tee "$out/gpu_gemm.log" | quiet | tail -8
timeout 130 python3 benchmarks/gemm_configs.py --algo wgmma_tf32x3 --dtypes float32 --shapes 4096x4096x4096 8192x8192x8192 --reps 10 2>&1 | tee "$out/configs_tf32.log" | quiet
timeout 240 python3 benchmarks/gemm_untuned.py --out "$out/gemm_untuned.json" 2>&1 | tee "$out/untuned.log" | quiet | tail -40
