#!/usr/bin/env bash
# Session 2026-11-25, device call 7: the FP32-accurate wgmma_tf32x3 algorithm (3xTF32 on wgmma + TMA) for the first
# time, wgmma_tma's split-K, the half rules with split TMA tiles; SASS; GPU tests of the GEMM family; variants.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database"; }
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_spaces_gemm_wgmma_tf32x3.py tests/test_spaces_gemm_wgmma_tma.py 2>&1 | tail -3
timeout 200 python3 benchmarks/gemm_configs.py --algo wgmma_tf32x3 --dtypes float32 --shapes 4096x4096x4096 8192x8192x8192 --reps 10 2>&1 | tee "$out/configs_tf32.log" | quiet
timeout 250 python3 -m pytest -m gpu -q -p no:cacheprovider -x tests/test_gpu_gemm.py tests/test_gpu_gemm_fallback.py -k "wgmma_tf32x3 or wgmma_tma or half or tma or fallback or rule" 2>&1 | tee "$out/gpu_gemm.log" | quiet | tail -15
