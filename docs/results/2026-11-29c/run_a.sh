#!/usr/bin/env bash
# Call 1 (2026-11-29c): softmax's autograd on softmax_backward (tests, benchmark), then where the GPT-2 and Llama
# blocks' host and GPU time go (host_probe.py, llama_probe.py).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29c
TAILN=6 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=6 step tests 200 python3 -m pytest -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py tests/test_gpu_library.py -k "softmax"
TAILN=40 step host 150 python3 $D/host_probe.py --rounds 7 --steps 25
TAILN=80 step llama 120 python3 $D/llama_probe.py
TAILN=12 step smb 120 python3 benchmarks/library_vs_torch.py --untuned --kernels softmax_backward --dtype float32 bfloat16
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
