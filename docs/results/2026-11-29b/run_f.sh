#!/usr/bin/env bash
# Call 6 (2026-11-29b): softmax_backward (issue 22, item 1's "softmax backward as a kernel too"): its GPU tests, the
# kernel against torch's _softmax_backward_data untuned, softmax's gradients through autograd (now our kernel).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=6 step tests 80 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_library.py -k "softmax_backward"
TAILN=0 step bench 50 python3 benchmarks/library_vs_torch.py --untuned --kernels softmax_backward --dtype float32 bfloat16 --shapes 8192x768 4096x4096 16384x8192 1024x65536 4x131072
grep -E "autotune +[0-9]" $OUT/bench.log | grep -v "^autotune:"
TAILN=6 step torch 75 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py -k "softmax"
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
