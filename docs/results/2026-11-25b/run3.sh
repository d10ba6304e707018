#!/usr/bin/env bash
# Session 2026-11-25 (second), device call 3: wgmma_tf32x3 for any K (padded workspaces) and fp32's narrowed rule
# (GPU tests, untuned fp32), then the nine shapes tuned in fp32 against cuBLAS FP32.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database"; }
timeout --signal=INT 120 python3 -m pytest -m gpu -q -p no:cacheprovider -n 12 tests/test_gpu_gemm.py tests/test_gpu_gemm_fallback.py tests/test_gpu_gemm_tf32.py -k "tf32 or fallback or rule" 2>&1 | tee "$out/gpu_gemm.log" | quiet | tail -6
timeout 70 python3 benchmarks/gemm_untuned.py --dtypes float32 --out "$out/gemm_untuned_fp32.json" 2>&1 | tee "$out/untuned.log" | quiet | tail -16
timeout 380 python3 benchmarks/gemm_vs_cublas.py --dtypes float32 --trials 100 --trials-more 40 --db /tmp/nine.db --out "$out/gemm_vs_cublas_fp32.json" 2>&1 | tee "$out/nine_fp32.log" | quiet | tail -22
