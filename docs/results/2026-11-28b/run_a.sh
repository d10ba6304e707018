#!/usr/bin/env bash
# Call 1 (second session of 2026-11-28, H200): what the last session landed without a GPU — SASS of the 192-accumulator
# tiles, the GEMM/layout/torch-linear GPU tier, the untuned GPT-2 layer GEMMs (wave-fill and LONG_K rules) against
# cuBLAS, and the hand-picked tiles at the K = 768 shapes.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache
TAILN=14 step sass 90 python3 - <<'PY'
import subprocess
from autotune.device import query_device
from autotune.runtime.compiler import Compiler
from autotune.spaces import get_space, ALGO
dev = query_device(); c = Compiler(dev.compile_arch)
cases = [("gemm", "bfloat16", "wgmma_tma", {}), ("gemm", "bfloat16", "wgmma_tma", {"BN": 192, "STAGES": 5}),
         ("gemm", "bfloat16", "wgmma_tma", {"PINGPONG": 1, "BN": 192, "STAGES": 5}),
         ("linear", "bfloat16", "wgmma_tma", {}), ("gemm_nt", "bfloat16", "wgmma_tma", {"PINGPONG": 1, "BN": 192, "STAGES": 5}),
         ("gemm_nt", "float32", "wgmma_tf32x3", {}), ("linear", "float32", "wgmma_tf32x3", {}),
         ("gemm_tn", "float32", "wgmma_tf32x3", {})]
for fam, dt, algo, change in cases:
    s = get_space(fam, dtype=dt); cfg = {ALGO: algo, **s.algos[algo].default_config, **change}
    try:
        r = c.compile(s.template_for(cfg), s.compile_defines(cfg, (8192, 3072, 768)))
    except Exception as e:
        print(fam, dt, change, "FAILED", str(e)[:300]); continue
    sass = subprocess.run(["cuobjdump", "-sass", r.cubin], capture_output=True, text=True).stdout
    print(fam, dt, algo, change, "HGMMA", sass.count("HGMMA"), "UTMALDG", sass.count("UTMALDG"), "regs", r.registers, "spills", r.spill_bytes)
PY
TAILN=25 step tier 330 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm.py tests/test_gpu_gemm_layouts.py tests/test_gpu_gemm_tf32.py tests/test_torch_linear_gpu.py tests/test_gpu_gemm_fallback.py
TAILN=30 step untuned 70 python3 benchmarks/linear_vs_torch.py --model gpt2 --dtypes bfloat16 float32 --reps 15 --db /tmp/none.db --out $OUT/untuned.json
TAILN=45 step configs 100 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --shapes 8192x3072x768 8192x768x3072 8192x2304x768 --reps 15
cd $OUT && tar czf logs.tgz *.log *.json && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
