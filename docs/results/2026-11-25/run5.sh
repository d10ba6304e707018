#!/usr/bin/env bash
# Session 2026-11-25, device call 5: the half-precision rule defaults (wgmma_tma where it fills the GPU, else
# split-K mma) on every shape class against cuBLAS, untuned (issue 19's >= 0.7x row); their GPU tests.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm"; }
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_gemm_fallback.py tests/test_gpu_gemm.py -k "half or tma or fallback or rule" 2>&1 | quiet | tail -6
timeout 400 python3 benchmarks/gemm_untuned.py --out "$out/gemm_untuned.json" 2>&1 | tee "$out/untuned.log" | quiet
