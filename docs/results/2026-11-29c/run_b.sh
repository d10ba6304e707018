#!/usr/bin/env bash
# Call 2 (2026-11-29c): N-D activations through the operators (no reshape/view around a module's call): the torch
# GPU tests, then the GPT-2 step (host_probe.py: eager / patched, 3-D and 2-D blocks, alternating) and the Llama block.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29c
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=12 step tests 240 python3 -m pytest -n 12 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py tests/test_torch_linear_gpu.py tests/test_gpu_dispatch.py
TAILN=40 step host 150 python3 $D/host_probe.py --rounds 9 --steps 25
TAILN=12 step gpt2 120 python3 examples/gpt2_block.py --graphs
TAILN=8 step llama 100 python3 examples/llama_block.py
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
