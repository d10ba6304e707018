#!/usr/bin/env bash
# Call 5 (four GPUs): fp32 scaling again with the compile deadline's floor at 3 s (racing on, the default); then the
# GPU tier on the big host, xdist workers spread over the four GPUs (AUTOTUNE_TEST_GPUS), then the tests of
# several GPUs and the process tests alone.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2 t; shift 2; echo "=== $name ($(date +%T))"; t=$(date +%s.%N); timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? process wall $(python3 -c "import time; print(round(time.time() - $t, 1))") s, at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
S="gemm --shape 8192x8192x8192 --trials 200 --seed 7 --profile --top 1"
TAILN=12 step fp32_one 90 env AUTOTUNE_CACHE_DIR=/tmp/c1 autotune search $S --devices 0 --db $OUT/f1.db
TAILN=12 step fp32_all 60 env AUTOTUNE_CACHE_DIR=/tmp/c2 autotune search $S --devices all --db $OUT/f4.db
python3 docs/results/2026-11-26c/timeline.py $OUT/f1.db $OUT/f4.db > $OUT/timeline.log; rm -f $OUT/*.db; cat $OUT/timeline.log
TAILN=14 step tier_parallel 330 env AUTOTUNE_TEST_GPUS=4 python3 -m pytest -m gpu -n 24 -q -p no:cacheprovider -rf --tb=line \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py
TAILN=8 step tier_serial 100 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_gpu_reliability.py tests/test_multi.py
cd $OUT && tar czf tier.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
