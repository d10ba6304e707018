#!/usr/bin/env bash
# Session 2026-11-25, device call 6: fp32 rule defaults on 3xTF32 (64x64 tile, split-K to fill) beyond 64 rows;
# half: narrower mma tiles for small outputs. Untuned against cuBLAS again.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
timeout 200 python3 benchmarks/gemm_untuned.py --dtypes float32 bfloat16 --shapes 200x4096x4096 4096x64x4096 16384x128x16384 256x256x65536 1024x1024x16384 1000x1000x1000 333x264x104 4095x4097x1023 2048x2048x2048 4096x4096x4096 64x4096x4096 --out "$out/gemm_untuned2.json" 2>&1 | grep -v "autotune: \|PyCUDA" | tee "$out/untuned2.log"
