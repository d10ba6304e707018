#!/usr/bin/env bash
# H100, run B: the GPU tests of the search path (search, reliability, multi-GPU, join, binaries, dispatch, torch),
# then the random recording continued (--append) to 3000 configurations.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p /tmp/t
timeout --signal=INT --kill-after=10 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests --ignore=tests/test_gpu_library.py --ignore=tests/test_gpu_gemm.py --ignore=tests/test_gpu_gemm_tf32.py --ignore=tests/test_gpu_gemm_fallback.py --ignore=tests/test_spaces_gemm_mma.py --ignore=tests/test_gpu_attention.py > $OUT/gpu_tests_rest.log 2>&1
echo "tests rc=$? $(tail -n 1 $OUT/gpu_tests_rest.log)"; grep -E "^(FAILED|ERROR)" $OUT/gpu_tests_rest.log | head
LEFT=$(( 585 - ($(date +%s) - T0) ))
timeout 600 python3 benchmarks/record_replay.py --random 3000 --shape 4096x4096x4096 --min-time-ms 5 --deadline-s $((LEFT - 25)) --append --out build/rec/random_gemm_4096.json.gz > $OUT/record2.log 2>&1
echo "record rc=$?"; tail -n 3 $OUT/record2.log
cp build/rec/random_gemm_4096.json.gz $OUT/
echo "done $(( $(date +%s) - T0 )) s"
