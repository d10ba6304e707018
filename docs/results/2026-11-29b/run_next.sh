#!/usr/bin/env bash
# For the next session's first calls. This session's tier (call 3, -n 14) ran past 540 s at ~96% (no failure, no
# summary), so the tier goes in two halves here; the GEMM and torch files were not run this session (unchanged).
#   bash run_next.sh 1   attention, search, reliability, dispatch and the rest but the row and GEMM files
#   bash run_next.sh 2   the GEMM files (test_gpu_gemm*.py), then the row families' whole files
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
GEMM="tests/test_gpu_gemm.py tests/test_gpu_gemm_layouts.py tests/test_gpu_gemm_fallback.py tests/test_gpu_gemm_tf32.py"
ROWS="tests/test_gpu_library.py tests/test_gpu_layernorm_backward.py"
case "${1:-1}" in
1)
  ignore=""; for f in $GEMM $ROWS; do ignore="$ignore --ignore=$f"; done
  TAILN=8 step tier_a 560 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=short --durations=10 $ignore
  ;;
2)
  TAILN=8 step tier_gemm 400 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=short --durations=10 $GEMM
  TAILN=8 step tier_rows 160 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=short $ROWS
  ;;
esac
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
