#!/usr/bin/env bash
# H100, run D: after the start-up change (validation kernel and baseline compiled side by side): one cold
# 200-trial search, timed alone; then the search-path GPU tests while the device's CPUs replay the slow samplers
# (gp, cmaes: correctness of the tests does not depend on the CPU load; no timing is taken then).
set -u
export PYTHONUNBUFFERED=1
echo "=== cold ($(date +%T))"
/usr/bin/time -f "process wall %e s" env AUTOTUNE_CACHE_DIR=/tmp/d timeout 100 autotune search gemm --trials 200 --profile --seed 11 --db /tmp/d.db > $OUT/seed11_cold.log 2>&1
tail -n 11 $OUT/seed11_cold.log
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
R="python3 benchmarks/sampler_efficiency.py --seeds 20 --budgets 25,50,100,200"
mkdir -p $OUT/s1024_gp $OUT/s1024_cmaes $OUT/s2048_cmaes
timeout 430 $R --recording tests/data/replay_gemm_h200.json --samplers gp --jobs 6 --out $OUT/s1024_gp > $OUT/s1024_gp/log 2>&1 &
timeout 430 $R --recording tests/data/replay_gemm_h200.json --samplers cmaes --jobs 4 --out $OUT/s1024_cmaes > $OUT/s1024_cmaes/log 2>&1 &
timeout 430 $R --recording benchmarks/data/replay_gemm_h200_2048.json.gz --samplers cmaes --jobs 4 --out $OUT/s2048_cmaes > $OUT/s2048_cmaes/log 2>&1 &
echo "=== tests ($(date +%T))"
timeout --signal=INT --kill-after=10 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests --ignore=tests/test_gpu_library.py --ignore=tests/test_gpu_gemm.py --ignore=tests/test_gpu_gemm_tf32.py --ignore=tests/test_gpu_gemm_fallback.py --ignore=tests/test_spaces_gemm_mma.py --ignore=tests/test_gpu_attention.py > $OUT/gpu_tests_rest_d.log 2>&1
echo "tests rc=$? $(tail -n 1 $OUT/gpu_tests_rest_d.log)"; grep -E "^(FAILED|ERROR)" $OUT/gpu_tests_rest_d.log | head
wait
for d in s1024_gp s1024_cmaes s2048_cmaes; do echo "== $d"; grep -v "^|---" $OUT/$d/log | head -8; done
cd $OUT && tar czf replays.tgz s1024_gp s1024_cmaes s2048_cmaes && rm -rf s1024_gp s1024_cmaes s2048_cmaes
