#!/usr/bin/env bash
# Call 5 (2026-11-29): GELU as x·σ(2u) in the epilogue and in gelu_bias_grad; the new families' GPU tests whole, the
# torch tests, the pieces against torch, the GPT-2 step in alternating rounds (untuned).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=3 step probe 70 python3 docs/results/2026-11-29/fusion_probe.py
TAILN=6 step tests 200 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_bias_grad.py tests/test_gpu_linear_gelu.py tests/test_torch_gpu.py tests/test_torch_linear_gpu.py
TAILN=10 step ab 70 python3 docs/results/2026-11-29/gpt2_ab.py --rounds 9 --steps 25
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
