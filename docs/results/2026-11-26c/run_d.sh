#!/usr/bin/env bash
# Call 4 (four GPUs), issue 24: 200-trial GEMM searches at 8192^3 on one GPU and on all four, same seed, each with its
# own cold compile cache, with the compile deadline and racing (the new default); then fp32 again with --no-race
# (the deadline alone), to separate the two.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2 t; shift 2; echo "=== $name ($(date +%T))"; t=$(date +%s.%N); timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? process wall $(python3 -c "import time; print(round(time.time() - $t, 1))") s, at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-16} $OUT/$name.log; }
nvidia-smi -L; nproc
S="gemm --shape 8192x8192x8192 --trials 200 --seed 7 --profile --top 3"
step fp32_one 120 env AUTOTUNE_CACHE_DIR=/tmp/c1 autotune search $S --devices 0 --db $OUT/f1.db
step fp32_all 70 env AUTOTUNE_CACHE_DIR=/tmp/c2 autotune search $S --devices all --db $OUT/f4.db
step bf16_one 80 env AUTOTUNE_CACHE_DIR=/tmp/c3 autotune search $S --dtype bfloat16 --devices 0 --db $OUT/b1.db
step bf16_all 60 env AUTOTUNE_CACHE_DIR=/tmp/c4 autotune search $S --dtype bfloat16 --devices all --db $OUT/b4.db
step fp32_one_norace 140 env AUTOTUNE_CACHE_DIR=/tmp/c5 autotune search $S --no-race --devices 0 --db $OUT/f1n.db
step fp32_all_norace 75 env AUTOTUNE_CACHE_DIR=/tmp/c6 autotune search $S --no-race --devices all --db $OUT/f4n.db
cd $OUT && tar czf search.tgz *.log *.db && rm -f *.log *.db
echo "done $(( $(date +%s) - T0 )) s"
