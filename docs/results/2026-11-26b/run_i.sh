#!/usr/bin/env bash
# Call 9 (the same H100): the torch GPU tests and the process tests, issue 21's host times, and the grouped decoding
# search that had its worker killed for host memory (64 x 32/8 heads x 128K keys).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=4 step torch_tests 120 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py
TAILN=4 step reliability 70 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_gpu_reliability.py
TAILN=16 step torch_overhead 60 python3 benchmarks/torch_overhead.py --out $OUT/torch_overhead.json
TAILN=8 step dispatch_overhead 40 python3 benchmarks/dispatch_overhead.py
TAILN=12 step gqa_search 220 python3 -m autotune search attention --shape 64x32x8x1x131072x128 --dtype bfloat16 \
  --trials 6 --db /tmp/gqa.db
echo "done $(( $(date +%s) - T0 )) s"
