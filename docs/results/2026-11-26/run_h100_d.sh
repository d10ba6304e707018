#!/usr/bin/env bash
# One H100: grouped-query attention (i-gqa, merged over main + i-driver) on a GPU for the first time: its GPU tests,
# then the attention GPU tests and the torch layer (multi-head paths unchanged: PTX identical on the CPU).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=15 step gqa 300 python3 -m pytest -m gpu -n 12 -q -p no:cacheprovider -rf --tb=line tests/test_gpu_attention_gqa.py
TAILN=10 step attention_and_torch 200 python3 -m pytest -m gpu -n 12 -q -p no:cacheprovider -rf --tb=line \
  tests/test_gpu_attention.py tests/test_gpu_attention_backward.py tests/test_torch_gpu.py
echo "done $(( $(date +%s) - T0 )) s"
