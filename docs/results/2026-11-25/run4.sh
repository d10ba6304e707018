#!/usr/bin/env bash
# Session 2026-11-25, device call 4: per-call host cost through the LaunchPlan (issue 21), the nine-shape bf16 suite
# against cuBLAS with wgmma_tma in the space (issue 19; 120 trials for the first shape, 40 for the others), then
# what the GPU tier's calls 2 and 3 left (test_gpu_library).
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{"; }
timeout 90 python3 benchmarks/dispatch_overhead.py --out "$out/dispatch_overhead.json" 2>&1 | tee "$out/overhead.log" | quiet
timeout 90 python3 benchmarks/torch_overhead.py --out "$out/torch_overhead.json" 2>&1 | tee -a "$out/overhead.log" | quiet | tail -20
timeout 330 python3 benchmarks/gemm_vs_cublas.py --dtypes bfloat16 --db /tmp/nine.db --out "$out/gemm_vs_cublas_bf16.json" 2>&1 | tee "$out/nine.log" | quiet | tail -22
timeout --signal=INT 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_library.py -k "tune_missing or torch or graph" 2>&1 | quiet | tail -4
