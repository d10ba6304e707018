#!/usr/bin/env bash
# Call 3: stream-K (the new wgmma_tma_streamk algorithm) on a GPU for the first time — its SASS, its GPU tests
# (partition edge cases, bitwise repeatability, the layout families), then against cuBLAS and the LONG_K rule's
# split-K at the GPT-2 weight gradients (gemm_tn, K = 8192); and the ping-pong tiles at 2048³ / 4096³ (how far
# the short-K rule may reach).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache
TAILN=6 step sass 60 python3 - <<'PY'
import subprocess
from autotune.device import query_device
from autotune.runtime.compiler import Compiler
from autotune.spaces import get_space, ALGO
dev = query_device(); c = Compiler(dev.compile_arch)
for fam in ("gemm", "gemm_tn", "linear"):
    s = get_space(fam, dtype="bfloat16"); cfg = {ALGO: "wgmma_tma_streamk", **s.algos["wgmma_tma_streamk"].default_config}
    r = c.compile(s.template_for(cfg), s.compile_defines(cfg, (768, 3072, 8192)))
    sass = subprocess.run(["cuobjdump", "-sass", r.cubin], capture_output=True, text=True).stdout
    print(fam, "streamk HGMMA", sass.count("HGMMA"), "UTMALDG", sass.count("UTMALDG"), "regs", r.registers, "spills", r.spill_bytes)
PY
TAILN=12 step tests 240 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm.py tests/test_gpu_gemm_layouts.py -k "stream or 192 or every_schedule or wgmma_tma"
TAILN=80 step dw 150 python3 benchmarks/gemm_configs.py --algo wgmma_tma_streamk --family gemm_tn --dtypes bfloat16 --shapes 768x3072x8192 3072x768x8192 768x768x8192 2304x768x8192 --reps 15
TAILN=30 step dw_split 60 python3 benchmarks/gemm_configs.py --algo wgmma_tma --only split4 --family gemm_tn --dtypes bfloat16 --shapes 768x3072x8192 3072x768x8192 768x768x8192 2304x768x8192 --reps 15
TAILN=40 step square 90 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --shapes 2048x2048x2048 4096x4096x4096 --reps 15
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
