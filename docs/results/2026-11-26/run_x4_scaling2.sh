#!/usr/bin/env bash
# Four GPUs, issue 24, after the driver and start-up changes (second measurement): 200-trial GEMM searches at 8192^3 on one GPU and on all four, fp32 and
# bf16, same seed, each with its own cold compile cache; then the multi-GPU tests (every GPU of the host), and the
# functional fast path's host time and tests. Ran on main + i-driver 21172b3 (the driver's cost cut, same proposals).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2 t; shift 2; echo "=== $name ($(date +%T))"; t=$(date +%s.%N); timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? process wall $(python3 -c "import time; print(round(time.time() - $t, 1))") s, at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-14} $OUT/$name.log; }
nvidia-smi -L; nproc
S="gemm --shape 8192x8192x8192 --trials 200 --seed 7 --profile"
step fp32_one 170 env AUTOTUNE_CACHE_DIR=/tmp/c1 autotune search $S --devices 0 --db $OUT/f1.db
step fp32_all 90 env AUTOTUNE_CACHE_DIR=/tmp/c2 autotune search $S --devices all --db $OUT/f4.db
step bf16_one 120 env AUTOTUNE_CACHE_DIR=/tmp/c3 autotune search $S --dtype bfloat16 --devices 0 --db $OUT/b1.db
step bf16_all 70 env AUTOTUNE_CACHE_DIR=/tmp/c4 autotune search $S --dtype bfloat16 --devices all --db $OUT/b4.db
TAILN=6 step multi_tests 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rf --tb=short tests/test_multi.py
# Issue 21 on this host: the functional layer_norm / rms_norm fast path (host time per call, same run as the ops).
TAILN=16 step torch_overhead 150 python3 benchmarks/torch_overhead.py --batches 30
TAILN=4 step torch_tests 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py -k "bad_input or launch_from_cpp"
echo "done $(( $(date +%s) - T0 )) s"
