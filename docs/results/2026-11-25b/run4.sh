#!/usr/bin/env bash
# Session 2026-11-25 (second), device call 4: the fallback test's new deep wgmma_tf32x3 case; bf16's weakest three
# shapes tuned with 200 trials each; fp16 over the nine shapes; the README's fp32 main job (cold) with
# wgmma_tf32x3 in its space.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database"; }
timeout --signal=INT 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_gemm_fallback.py -k "rule_default_correctly" 2>&1 | quiet | tail -3
rm -f /tmp/s.db
( time AUTOTUNE_CACHE_DIR=/tmp/cold autotune search gemm --trials 200 --db /tmp/s.db --seed 1 ) > "$out/readme_fp32.log" 2>&1
tail -14 "$out/readme_fp32.log"
timeout 200 python3 benchmarks/gemm_vs_cublas.py --dtypes bfloat16 --shapes 1024x1024x1024 1000x1000x1000 127x4096x4096 --trials 200 --trials-more 200 --db /tmp/small.db --out "$out/gemm_vs_cublas_bf16_small.json" 2>&1 | tee "$out/bf16_small.log" | quiet | tail -8
timeout 260 python3 benchmarks/gemm_vs_cublas.py --dtypes float16 --trials 120 --trials-more 60 --db /tmp/nine.db --out "$out/gemm_vs_cublas_fp16.json" 2>&1 | tee "$out/nine_fp16.log" | quiet | tail -14
