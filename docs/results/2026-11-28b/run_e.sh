#!/usr/bin/env bash
# Call 5: why the patched bf16 GPT-2 step is slower than eager although its GEMMs now run at 0.97× cuBLAS
# untuned: host time to enqueue a step against the GPU kernel time, Linear patched and not.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=20 step gpt2 120 python3 examples/gpt2_block.py --dtype bfloat16 --steps 20 --no-compile
TAILN=20 step gpt2_norms 90 python3 examples/gpt2_block.py --dtype bfloat16 --steps 20 --no-compile --norms-only
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
