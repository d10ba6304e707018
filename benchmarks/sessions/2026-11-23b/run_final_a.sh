#!/usr/bin/env bash
# H100, final run A: every GPU test (four groups in parallel: correctness only), then the cold and warm 200-trial
# GEMM search with --profile (sequential, nothing else running).
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/t
group() { local name=$1; shift; timeout --signal=INT --kill-after=10 300 python3 -m pytest -q -m gpu -p no:cacheprovider "$@" > /tmp/t/$name.log 2>&1; echo "$name rc=$? $(tail -n 1 /tmp/t/$name.log)"; }
G1="tests/test_gpu_library.py"
G2="tests/test_gpu_gemm.py tests/test_gpu_gemm_tf32.py tests/test_gpu_gemm_fallback.py tests/test_spaces_gemm_mma.py"
G3="tests/test_gpu_attention.py"
echo "=== tests ($(date +%T))"
group lib $G1 & group gemm $G2 & group attn $G3 &
group rest tests --ignore=tests/test_gpu_library.py --ignore=tests/test_gpu_gemm.py --ignore=tests/test_gpu_gemm_tf32.py --ignore=tests/test_gpu_gemm_fallback.py --ignore=tests/test_spaces_gemm_mma.py --ignore=tests/test_gpu_attention.py &
wait
for f in /tmp/t/*.log; do grep -E "^(FAILED|ERROR)" $f | head -5; done
tar czf $OUT/gpu_tests.tgz -C /tmp t
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; tail -n ${TAILN:-12} $OUT/$name.log; }
TAILN=10 step search_cold 110 env AUTOTUNE_CACHE_DIR=/tmp/cold autotune search gemm --trials 200 --profile --db /tmp/p.db
TAILN=10 step search_warm 80 env AUTOTUNE_CACHE_DIR=/tmp/cold autotune search gemm --trials 200 --profile --db /tmp/p2.db
