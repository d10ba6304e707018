#!/usr/bin/env bash
# Session 2026-11-25, device call 8: wgmma_tf32x3 without FOLD=8 (call 7: it missed the accuracy contract);
# the GEMM family's GPU tests for the TMA algorithms and the rules.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database"; }
timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_gemm.py tests/test_gpu_gemm_fallback.py -k "wgmma_tf32x3 or wgmma_tma or half or tma or fallback or rule" 2>&1 | tee "$out/gpu_gemm.log" | quiet | tail -12
timeout 120 python3 benchmarks/gemm_configs.py --algo wgmma_tf32x3 --dtypes float32 --shapes 4096x4096x4096 8192x8192x8192 --reps 10 2>&1 | tee "$out/configs_tf32.log" | quiet
