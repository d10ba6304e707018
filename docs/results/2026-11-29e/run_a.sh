#!/usr/bin/env bash
# Call 1 (2026-11-29e): last session's unrun template edit (linear_gelu's skinny epilogue), then where the Llama
# decoding step goes: host cost per call, profiles, cat against static cache, CUDA graphs (decode_probe.py).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29e
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=6 step tests 200 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_skinny.py tests/test_gpu_linear_gelu.py
TAILN=40 step decode 240 python3 $D/decode_probe.py --profile
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
