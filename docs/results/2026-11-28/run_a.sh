#!/usr/bin/env bash
# Call 1 (the session's one call: 547 s of device time): the GEMM layouts on a GPU for the first time — SASS of
# the native TMA paths, their correctness (evaluator and torch), then untuned speed against cuBLAS through torch
# (the Linear GEMMs of GPT-2, and the GPT-2 block's training step), then the rest of the GEMM/torch tier.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache
TAILN=12 step sass 60 python3 - <<'PY'
import subprocess
from autotune.device import query_device
from autotune.runtime.compiler import Compiler
from autotune.spaces import get_space, ALGO
dev = query_device(); c = Compiler(dev.compile_arch)
for fam in ("gemm", "gemm_nt", "gemm_tn", "linear"):
    s = get_space(fam, dtype="bfloat16"); cfg = {ALGO: "wgmma_tma", **s.algos["wgmma_tma"].default_config}
    r = c.compile(s.template_for(cfg), s.compile_defines(cfg, (8192, 3072, 768)))
    sass = subprocess.run(["cuobjdump", "-sass", r.cubin], capture_output=True, text=True).stdout
    print(fam, "HGMMA", sass.count("HGMMA"), "UTMALDG", sass.count("UTMALDG"), "regs", r.registers, "spills", r.spill_bytes)
PY
TAILN=20 step layouts 200 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_layouts.py
TAILN=20 step torch_linear 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_torch_linear_gpu.py tests/test_torch_gpu.py -k "not attention"
TAILN=40 step bench 120 python3 benchmarks/linear_vs_torch.py --model gpt2 --dtypes bfloat16 float32 --reps 20 --out $OUT/linear_vs_torch.json
TAILN=30 step gpt2 120 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 10
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
