#!/usr/bin/env bash
# H100, run A (second session of 2026-11-24): after fp32 templates stopped including the half headers and the
# worker's set-up moved beside the first compiles. Cold 200-trial searches (seeds 11 and 5, as last session's runs
# D and C), then seed 11 again on seed 11's compile cache (warm), each timed alone; then the GPU tests of the
# search path and of the GEMM families, and a look at the SASS of one tf32x3 candidate (HMMA present).
set -u
export PYTHONUNBUFFERED=1
for run in "cold11 /tmp/c11 11" "cold5 /tmp/c5 5" "warm11 /tmp/c11 11"; do
  set -- $run
  echo "=== $1 ($(date +%T))"
  /usr/bin/time -f "process wall %e s" env AUTOTUNE_CACHE_DIR=$2 timeout 120 autotune search gemm --trials 200 \
    --profile --seed $3 --db /tmp/$1.db > $OUT/$1.log 2>&1
  tail -n 12 $OUT/$1.log
done
cubin=$(ls -t /tmp/c11/cubin/*/*.cubin | head -50 | while read f; do cuobjdump -sass $f | grep -q HMMA && echo $f && break; done)
echo "HMMA in a cached candidate: $(cuobjdump -sass $cubin | grep -c HMMA) instructions ($cubin)"
echo "=== tests ($(date +%T))"
timeout --signal=INT --kill-after=10 330 python3 -m pytest -q -m gpu -p no:cacheprovider tests \
  --ignore=tests/test_gpu_library.py --ignore=tests/test_gpu_attention.py --ignore=tests/test_torch_gpu.py \
  > $OUT/gpu_tests_a.log 2>&1
echo "tests rc=$? $(tail -n 1 $OUT/gpu_tests_a.log)"; grep -E "^(FAILED|ERROR)" $OUT/gpu_tests_a.log | head
