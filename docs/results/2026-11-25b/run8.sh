#!/usr/bin/env bash
# Session 2026-11-25 (second), device call 8: the merged main (spaces and templates shared, Search's proposer and
# hooks, fa3, the C++ launcher, the trimmed functions): per-call host times, then the whole GPU tier in parallel
# (process and signal tests included) within the session's last device minutes.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database\|no configuration of .* tuned for\|Warning\|warn\|^$\|_check_inputs\|^tests/.*::"; }
timeout 70 python3 benchmarks/torch_overhead.py --batches 20 --out "$out/torch_overhead.json" 2>&1 | tee "$out/overhead.log" | quiet | tail -14
timeout --signal=INT 195 python3 -m pytest -m gpu -q -p no:cacheprovider -n 14 --durations=5 2>&1 | tee "$out/gpu_tier.log" | quiet | tail -22
