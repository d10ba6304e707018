#!/usr/bin/env bash
# Call 9: the GEMMs', linear's and layernorm's backward as C++ autograd nodes (no Python per training call): the
# torch GPU tests (gradients against float64, opcheck, torch.compile, CUDA graphs), the GPT-2 pieces' host cost and
# the bf16 GPT-2 step (issue 22).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
python3 -c "import torch, autotune.torch as a; from autotune.runtime import torch_native as n; print('native:', n.module() is not None, n.unavailable_reason())" > $OUT/build.log 2>&1; tail -3 $OUT/build.log; echo "built at $(( $(date +%s) - T0 )) s"
TAILN=6 step torch_tests 150 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py tests/test_torch_linear_gpu.py
TAILN=9 step host_ops 60 python3 docs/results/2026-11-28c/gpt2_host_ops.py
TAILN=4 step gpt2 60 python3 examples/gpt2_block.py --dtype bfloat16 --steps 30 --no-compile
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
