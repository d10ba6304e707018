#!/usr/bin/env bash
# Call 6 (2026-11-29): 1 − σ taken as e·σ in gelu' (the fp32 gelu_bias_grad sum at 7×1 missed its 1e-5 in call 5):
# the new families' GPU tests whole, the pieces against torch.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=6 step tests 170 python3 -m pytest -m gpu -n 10 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_bias_grad.py tests/test_gpu_linear_gelu.py
TAILN=3 step probe 60 python3 docs/results/2026-11-29/fusion_probe.py
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
