#!/usr/bin/env bash
# Call 2 (2026-11-29b): the split mapping for few long rows (issue 22, item 2): its GPU tests and the row families',
# split against the mapping the rule chose before, few long rows and the softmax suite against torch (untuned).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=8 step tests 240 python3 -m pytest -m gpu -n 12 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_library.py tests/test_gpu_layernorm_backward.py
TAILN=70 step probe 150 python3 docs/results/2026-11-29b/split_probe.py
TAILN=0 step fewrows 150 python3 benchmarks/library_vs_torch.py --untuned --kernels softmax layernorm rmsnorm --dtype float32 bfloat16 --shapes 1x131072 4x131072 4x262144 2x1048576 4x1048576 1x16777216
grep -E "autotune +[0-9]" $OUT/fewrows.log | grep -v "^autotune:"
TAILN=0 step suite 120 python3 benchmarks/library_vs_torch.py --untuned --kernels softmax --dtype float32 bfloat16
grep -E "autotune +[0-9]" $OUT/suite.log | grep -v "^autotune:"
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
