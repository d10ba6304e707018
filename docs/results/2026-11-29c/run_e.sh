#!/usr/bin/env bash
# Call 5 (2026-11-29c): the SwiGLU kernel's SASS; the TMA GEMM tests after the template's new define; issue 22's
# protocol on the Llama block (record → search --shapes-from → patched, alternating rounds) and the GPT-2 step in
# more rounds.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/tuned.db
D=docs/results/2026-11-29c
TAILN=3 step sass 60 bash -c "nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernel_templates -DDTYPE=2 -DB_K_MAJOR=1 -DGEMM_SWIGLU=1 -o /tmp/sw.cubin kernel_templates/gemm_wgmma_tma.cu && cuobjdump -sass /tmp/sw.cubin > /tmp/sw.sass && echo HGMMA \$(grep -c HGMMA /tmp/sw.sass) UTMALDG \$(grep -c UTMALDG /tmp/sw.sass) MUFU.EX2 \$(grep -c MUFU.EX2 /tmp/sw.sass)"
TAILN=8 step gemm_tests 170 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_layouts.py tests/test_gpu_linear_gelu.py -k "tma or rule"
TAILN=3 step llama_record 60 python3 examples/llama_block.py --no-compile --record /tmp/llama.json
TAILN=4 step llama_search 130 python3 -m autotune search --shapes-from /tmp/llama.json --trials 12
TAILN=30 step llama_ab 120 python3 $D/attention_probe.py --models llama --rounds 7
TAILN=8 step gpt2_ab 100 python3 $D/attention_probe.py --models gpt2 --rounds 11
cp /tmp/llama.json $OUT/ 2>/dev/null
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
