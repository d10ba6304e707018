#!/usr/bin/env bash
# Call 6 (four GPUs), issue 24, everything of this session: compile deadline (3 s floor, one watcher), racing, TPE
# sampling only the groups a proposal uses, defaults over the race line not re-timed, the leaders re-timed on every
# GPU with the rounds split. 200-trial GEMM searches at 8192^3, one GPU and four, fp32 and bf16, same seed, each with
# its own cold compile cache; then the tests of several GPUs (whole searches on all four, a crash on one).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2 t; shift 2; echo "=== $name ($(date +%T))"; t=$(date +%s.%N); timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? process wall $(python3 -c "import time; print(round(time.time() - $t, 1))") s, at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-12} $OUT/$name.log; }
nvidia-smi -L; nproc
S="gemm --shape 8192x8192x8192 --trials 200 --seed 7 --profile --top 1"
step fp32_one 90 env AUTOTUNE_CACHE_DIR=/tmp/c1 autotune search $S --devices 0 --db $OUT/f1.db
step fp32_all 60 env AUTOTUNE_CACHE_DIR=/tmp/c2 autotune search $S --devices all --db $OUT/f4.db
step bf16_one 60 env AUTOTUNE_CACHE_DIR=/tmp/c3 autotune search $S --dtype bfloat16 --devices 0 --db $OUT/b1.db
step bf16_all 60 env AUTOTUNE_CACHE_DIR=/tmp/c4 autotune search $S --dtype bfloat16 --devices all --db $OUT/b4.db
python3 docs/results/2026-11-26c/timeline.py $OUT/f1.db $OUT/f4.db $OUT/b1.db $OUT/b4.db > $OUT/timeline.log; rm -f $OUT/*.db
TAILN=4 step multi_tests 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rf --tb=short tests/test_multi.py
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
