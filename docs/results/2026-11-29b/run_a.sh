#!/usr/bin/env bash
# Call 1 (2026-11-29b): last session's unrun edits (gelu.cuh's clamp, patch's traced fusion: run_next.sh 1's tests,
# the pieces and the GPT-2 A/B), then few long rows untuned against torch (issue 22, item 2's baseline).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=6 step tests 240 python3 -m pytest -m gpu -n 10 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_bias_grad.py tests/test_gpu_linear_gelu.py tests/test_torch_gpu.py tests/test_torch_linear_gpu.py tests/test_gpu_dispatch.py
TAILN=10 step probe 70 python3 docs/results/2026-11-29/fusion_probe.py
TAILN=40 step ab 90 python3 docs/results/2026-11-29/gpt2_ab.py --rounds 9 --steps 25
TAILN=50 step fewrows 200 python3 benchmarks/library_vs_torch.py --untuned --kernels softmax layernorm rmsnorm --dtype float32 bfloat16 --shapes 1x131072 4x131072 4x262144 2x1048576 4x1048576
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
