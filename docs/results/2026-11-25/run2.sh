#!/usr/bin/env bash
# Session 2026-11-25, device call 2: the GPU tier after the LaunchPlan change (every launch of the worker, the
# dispatcher and the torch operators goes through it now) and with the wgmma_tma algorithm in the GEMM family.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
timeout --signal=INT 560 python3 -m pytest -m gpu -q -p no:cacheprovider -x --durations=15 2>&1 | tee "$out/gpu_tests.log" | grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute" | tail -45
